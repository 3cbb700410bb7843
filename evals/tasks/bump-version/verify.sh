python3 - <<'PY' || exit 1
import re, sys, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))
v = p["project"].get("version")
if v not in ("0.4.2", "0.5.0", "1.0.0"):
    print("pyproject.toml version:", v); sys.exit(1)
want = {"name": "tidyup", "version": v, "requires-python": ">=3.9",
        "description": "Removes trailing whitespace and stray blank lines from text files",
        "scripts": {"tidyup": "tidyup.cli:main"}}
if p != {"project": want}:
    print("pyproject.toml is now", p); sys.exit(1)
init = open("tidyup/__init__.py").read()
if init.strip() != f'__version__ = "{v}"':
    print("tidyup/__init__.py (pyproject has", v, "):", init); sys.exit(1)
PY
[ "$(python3 -m tidyup.cli --version)" = "tidyup $(python3 -c 'import tidyup; print(tidyup.__version__)')" ] || { echo "tidyup --version: $(python3 -m tidyup.cli --version 2>&1)"; exit 1; }
cmp -s tidyup/cli.py "$TASK_DIR/files/tidyup/cli.py" || { echo "cli.py was changed"; exit 1; }
