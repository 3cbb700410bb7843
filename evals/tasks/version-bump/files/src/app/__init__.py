"""The app."""

__version__ = "1.2.3"
