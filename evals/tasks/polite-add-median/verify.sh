cmp -s test_scores.py "$TASK_DIR/files/test_scores.py" || { echo "the tests were changed"; exit 1; }
python3 -m unittest -q test_scores 2>&1 || exit 1
python3 - <<'PY' || exit 1
import sys
from scores import mean, median
for values, want in [([5, 1, 3], 3), ([10, 2, 4, 8], 6), ([1, 2], 1.5), ([7], 7), ([3, 3, 9, 1, 2], 3)]:
    if median(list(values)) != want:
        print(f"median({values}) = {median(list(values))}, expected {want}"); sys.exit(1)
if mean([1, 2]) != 1.5:
    print("mean changed"); sys.exit(1)
PY
