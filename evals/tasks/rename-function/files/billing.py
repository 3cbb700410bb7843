def calc_total(prices, tax_rate=0.0):
    """Sum of prices plus tax."""
    subtotal = sum(prices)
    return round(subtotal * (1 + tax_rate), 2)
