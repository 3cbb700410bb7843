import unittest

from scores import highest, mean, median


class ScoresTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([70, 80, 90]), 80)

    def test_highest(self):
        self.assertEqual(highest([55, 91, 78]), 91)

    def test_median_odd(self):
        self.assertEqual(median([62, 95, 71]), 71)

    def test_median_even(self):
        self.assertEqual(median([88, 60, 70, 90]), 79)

    def test_median_single(self):
        self.assertEqual(median([42]), 42)


if __name__ == "__main__":
    unittest.main()
