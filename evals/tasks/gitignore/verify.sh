test -f .gitignore || { echo ".gitignore missing"; exit 1; }
for p in pkg/__pycache__/mod.cpython-311.pyc __pycache__/x.pyc server.log logs/debug.log; do
  git check-ignore -q --no-index "$p" || { echo "$p is not ignored"; exit 1; }
done
if git check-ignore -q --no-index pkg/mod.py; then echo "pkg/mod.py is ignored"; exit 1; fi
