out=$(python3 report.py 2>&1) || { echo "report.py fails: $out"; exit 1; }
[ "$out" = "$(printf 'apples: 3\npears: 5\nplums: 2')" ] || { echo "report.py prints: $out"; exit 1; }
