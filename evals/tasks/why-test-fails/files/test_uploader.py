import unittest

from uploader import load_settings, request_timeout, retries


class SettingsTest(unittest.TestCase):
    def setUp(self):
        self.settings = load_settings()

    def test_timeout_comes_from_settings(self):
        self.assertEqual(request_timeout(self.settings), 30)

    def test_retries_come_from_settings(self):
        self.assertEqual(retries(self.settings), 2)


if __name__ == "__main__":
    unittest.main()
