from blog.posts import Post
from blog.text import slugify


def feed_entry(post: Post, site="https://example.org"):
    return {"id": f"{site}/{slugify(post.title)}", "title": post.title, "link": site + post.url}
