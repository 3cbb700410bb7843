python3 - <<'PY' || exit 1
import json, sys
c = json.load(open("config.json"))
want = {"service": "rechnungen", "host": "api.example.de", "port": 443, "timeout": 30, "retries": 3, "verify_ssl": True}
if c != want or isinstance(c.get("timeout"), (bool, str)):
    print("config.json is now", c); sys.exit(1)
PY
cmp -s client.py "$TASK_DIR/files/client.py" || { echo "client.py was changed"; exit 1; }
