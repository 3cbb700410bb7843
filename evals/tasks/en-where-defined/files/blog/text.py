"""Text helpers for post titles and summaries."""
import re


def slugify(title):
    """'Hello, World!' -> 'hello-world'"""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "-".join(words)


def excerpt(body, words=30):
    parts = body.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")
