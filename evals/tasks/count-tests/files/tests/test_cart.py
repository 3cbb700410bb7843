import unittest

from cart import Cart


class CartTest(unittest.TestCase):
    def make_cart(self):
        cart = Cart()
        cart.add("pen", 150, 2)
        cart.add("pad", 400)
        return cart

    def test_empty_cart_totals_zero(self):
        self.assertEqual(Cart().total(), 0)

    def test_total(self):
        self.assertEqual(self.make_cart().total(), 700)

    def test_adding_twice_adds_quantities(self):
        cart = self.make_cart()
        cart.add("pen", 150)
        self.assertEqual(cart.total(), 850)

    def test_remove(self):
        cart = self.make_cart()
        cart.remove("pad")
        self.assertEqual(cart.total(), 300)

    def test_discount(self):
        self.assertEqual(self.make_cart().total(discount_percent=10), 630)
