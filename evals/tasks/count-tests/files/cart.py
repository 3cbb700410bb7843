from prices import apply_discount


class Cart:
    def __init__(self):
        self.lines = {}

    def add(self, sku, price, quantity=1):
        old = self.lines.get(sku, (price, 0))[1]
        self.lines[sku] = (price, old + quantity)

    def remove(self, sku):
        self.lines.pop(sku, None)

    def total(self, discount_percent=0):
        gross = sum(price * quantity for price, quantity in self.lines.values())
        return apply_discount(gross, discount_percent)
