import unittest

from money import format_cents


class FormatTest(unittest.TestCase):
    def test_format(self):
        self.assertEqual(format_cents(1999), "19.99 EUR")

    def test_format_small(self):
        self.assertEqual(format_cents(5), "0.05 EUR")


if __name__ == "__main__":
    unittest.main()
