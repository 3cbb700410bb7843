python3 - <<'PY' || exit 1
import tomllib, sys, re
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
if p.get("version") != "1.3.0" or p.get("dependencies") != ["requests>=2.31"]:
    print("pyproject:", p); sys.exit(1)
src = open("src/app/__init__.py").read()
if not re.search(r'__version__ = "1\.3\.0"', src) or "1.2.3" in src:
    print("__init__.py:", src); sys.exit(1)
PY
