test -f hello.py || { echo "hello.py missing"; exit 1; }
out=$(python3 hello.py 2>&1)
[ "$out" = "Hello, keel!" ] || { echo "hello.py printed: $out"; exit 1; }
