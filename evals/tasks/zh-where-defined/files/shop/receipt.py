from shop.cart import Cart
from shop.money import format_price


def receipt(cart: Cart, paid_cents):
    change = paid_cents - cart.total()
    return cart.describe() + f"\n实付: {format_price(paid_cents)}\n找零: {format_price(change)}"
