python3 - <<'PY' || exit 1
import ast, sys
tree = ast.parse(open("report.py").read())
names = set()
for node in ast.walk(tree):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names |= {alias.asname or alias.name for alias in node.names}
if names != {"sys", "json", "Counter"}:
    print("report.py imports", sorted(names), "- expected exactly json, sys and Counter"); sys.exit(1)
PY
[ "$(python3 report.py 2>&1)" = "$(printf 'tea: 3\ncoffee: 2\ncocoa: 1')" ] || { echo "report.py prints: $(python3 report.py 2>&1 | tail -3)"; exit 1; }
code() { grep -v -e '^import ' -e '^from ' -e '^$' "$1"; }
[ "$(code report.py)" = "$(code "$TASK_DIR/files/report.py")" ] || { echo "code other than imports changed: $(diff <(code "$TASK_DIR/files/report.py") <(code report.py))"; exit 1; }
cmp -s orders.json "$TASK_DIR/files/orders.json" || { echo "orders.json was changed"; exit 1; }
