if grep -n "DEBUG" app.py; then echo "DEBUG prints remain"; exit 1; fi
out=$(python3 app.py 2>&1) || { echo "app.py fails: $out"; exit 1; }
[ "$out" = "$(printf 'Hello, Ada!\nHello, Grace!')" ] || { echo "app.py prints: $out"; exit 1; }
