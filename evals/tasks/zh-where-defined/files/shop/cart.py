from shop.money import format_price


class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, cents, quantity=1):
        self.items.append((name, cents, quantity))

    def total(self):
        return sum(cents * quantity for _, cents, quantity in self.items)

    def describe(self):
        lines = [f"{name} x{quantity}: {format_price(cents * quantity)}" for name, cents, quantity in self.items]
        lines.append(f"合计: {format_price(self.total())}")
        return "\n".join(lines)
