"""Prices are kept in whole cents; these turn them into text and back."""


def format_price(cents, currency="¥"):
    """12345 -> '¥123.45'"""
    return f"{currency}{cents // 100}.{cents % 100:02d}"


def parse_price(text):
    """'¥123.45' or '123.45' -> 12345"""
    yuan, _, fen = text.lstrip("¥").partition(".")
    return int(yuan) * 100 + int((fen or "0").ljust(2, "0")[:2])
