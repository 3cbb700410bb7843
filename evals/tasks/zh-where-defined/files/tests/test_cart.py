import unittest

from shop.cart import Cart
from shop.money import format_price, parse_price


class CartTest(unittest.TestCase):
    def test_total(self):
        cart = Cart()
        cart.add("茶叶", 4800, 2)
        cart.add("茶杯", 1250)
        self.assertEqual(cart.total(), 10850)

    def test_price_round_trip(self):
        self.assertEqual(parse_price(format_price(10850)), 10850)


if __name__ == "__main__":
    unittest.main()
