for f in test_invoice.py test_money.py; do
  cmp -s $f "$TASK_DIR/files/$f" || { echo "the tests were changed ($f)"; exit 1; }
done
python3 -m unittest -q test_invoice test_money 2>&1 || exit 1
python3 - <<'PY' || exit 1
import sys
from money import to_cents
for amount, want in [(0.29, 29), (1.15, 115), (4.35, 435), (19.99, 1999), (2, 200), (0.07, 7)]:
    got = to_cents(amount)
    if got != want or not isinstance(got, int):
        print(f"to_cents({amount}) = {got!r}, expected {want} (the helper in money.py is still wrong)"); sys.exit(1)
PY
