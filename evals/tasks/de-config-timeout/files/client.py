import json
import urllib.request


def load_config(path="config.json"):
    with open(path) as f:
        return json.load(f)


def fetch(path, config):
    url = f"https://{config['host']}:{config['port']}/{path.lstrip('/')}"
    return urllib.request.urlopen(url, timeout=config["timeout"]).read()
