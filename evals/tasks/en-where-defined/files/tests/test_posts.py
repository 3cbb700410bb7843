import unittest

from blog.posts import Post
from blog.text import slugify


class PostTest(unittest.TestCase):
    def test_url(self):
        self.assertEqual(Post("Hello, World!", "").url, "/posts/hello-world/")

    def test_slug_drops_punctuation(self):
        self.assertEqual(slugify("  C++ & Rust: a comparison "), "c-rust-a-comparison")


if __name__ == "__main__":
    unittest.main()
