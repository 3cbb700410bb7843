"""Small helpers for exam scores."""


def mean(values):
    """The arithmetic mean of values."""
    return sum(values) / len(values)


def highest(values):
    """The best score."""
    return max(values)
