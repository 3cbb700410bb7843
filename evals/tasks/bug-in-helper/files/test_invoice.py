import unittest

from invoice import invoice_total, render

LINES = [("pen", 1.15, 2), ("notebook", 4.35, 1), ("stapler", 7.5, 1)]


class InvoiceTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(invoice_total(LINES), 1415)

    def test_render_last_line(self):
        self.assertEqual(render(LINES).splitlines()[-1], "total: 14.15 EUR")

    def test_empty(self):
        self.assertEqual(invoice_total([]), 0)


if __name__ == "__main__":
    unittest.main()
