import unittest

from prices import apply_discount, with_vat


class DiscountTest(unittest.TestCase):
    def test_no_discount(self):
        self.assertEqual(apply_discount(1000, 0), 1000)

    def test_half_price(self):
        self.assertEqual(apply_discount(1000, 50), 500)

    def test_rejects_more_than_everything(self):
        with self.assertRaises(ValueError):
            apply_discount(1000, 120)


class VatTest(unittest.TestCase):
    def test_default_rate(self):
        self.assertEqual(with_vat(1000), 1200)
