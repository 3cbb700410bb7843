def apply_discount(cents, percent):
    if not 0 <= percent <= 100:
        raise ValueError("percent must be between 0 and 100")
    return cents - cents * percent // 100


def with_vat(cents, rate=20):
    return cents + cents * rate // 100
