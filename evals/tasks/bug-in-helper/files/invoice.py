from money import format_cents, to_cents


def invoice_total(lines):
    """lines: (description, unit price in euros, quantity) tuples; the total in cents."""
    return sum(to_cents(price) * quantity for _, price, quantity in lines)


def render(lines):
    out = [f"{quantity} x {description}: {format_cents(to_cents(price) * quantity)}" for description, price, quantity in lines]
    out.append(f"total: {format_cents(invoice_total(lines))}")
    return "\n".join(out)
