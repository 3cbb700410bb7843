"""Text helpers."""


def shout(text):
    """Upper-case text with an exclamation mark."""
    return text.upper() + "!"


def word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split())
