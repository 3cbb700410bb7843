git init -q -b main . && git add -A && git commit -qm "Initial commit"
cat >> app.py <<'PY'


def login(user, password, users):
    return users.get(user) == password
PY
git commit -qam "Add a login check"
sed -i 's/^MAX_UPLOAD_MB = 10$/MAX_UPLOAD_MB = 50/; s|"image/jpeg"\]|"image/jpeg", "image/webp"]|' config.py
sed -i 's/PNG or JPEG pictures of up to 10 MB/PNG, JPEG or WebP pictures of up to 50 MB/' README.md
git commit -qam "Raise the upload limit and accept WebP"
git rev-parse HEAD > .git/eval-setup-head
