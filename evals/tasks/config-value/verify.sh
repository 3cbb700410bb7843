python3 - <<'PY' || exit 1
import tomllib, sys
with open("config.toml", "rb") as f:
    c = tomllib.load(f)
want = {"name": "inventory", "server": {"host": "127.0.0.1", "port": 8080, "workers": 4},
        "database": {"url": "postgres://localhost/inventory", "port": 5432}}
if c != want:
    print("config.toml is now", c); sys.exit(1)
PY
