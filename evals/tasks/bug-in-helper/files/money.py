"""Money is handled in whole cents; prices come in as euros (floats like 19.99)."""


def to_cents(amount):
    """19.99 -> 1999"""
    return int(amount * 100)


def format_cents(cents):
    """1999 -> '19.99 EUR'"""
    return f"{cents // 100}.{cents % 100:02d} EUR"
