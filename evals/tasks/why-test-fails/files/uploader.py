import json


def load_settings(path="settings.json"):
    with open(path) as f:
        return json.load(f)


def request_timeout(settings):
    """Seconds to wait for the server; 10 unless the settings say otherwise."""
    return settings.get("timeout", 10)


def retries(settings):
    return settings.get("retries", 0)
