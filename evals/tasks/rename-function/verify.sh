if grep -rn "calc_total" --include='*.py' .; then echo "calc_total still present"; exit 1; fi
grep -q "def compute_total" billing.py || { echo "no compute_total in billing.py"; exit 1; }
[ "$(python3 main.py)" = "46.75" ] || { echo "main.py prints: $(python3 main.py 2>&1)"; exit 1; }
