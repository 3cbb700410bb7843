# history: the server without /health, then "Add a /health endpoint" (files/ as they are), then the port change
git init -q -b main .
python3 - <<'PY'
src = open("server.py").read()
start = src.index('        if self.path == "/health":')
end = src.index("        self.send_response(404)")
open("server.py", "w").write(src[:start] + src[end:])
PY
sed -i 's|open http://127.0.0.1:8000/health|it answers on port 8000|' README.md
git add -A && git commit -qm "Initial commit"
cp "$TASK_DIR/files/server.py" "$TASK_DIR/files/README.md" .
git commit -qam "Add a /health endpoint"
sed -i 's/^PORT = 8000$/PORT = 9000/' server.py
sed -i 's/8000/9000/' README.md
git commit -qam "Use port 9000"
