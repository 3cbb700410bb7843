from blog.text import excerpt, slugify


class Post:
    def __init__(self, title, body):
        self.title = title
        self.body = body

    @property
    def url(self):
        return f"/posts/{slugify(self.title)}/"

    def teaser(self):
        return f"{self.title}: {excerpt(self.body, 12)}"
