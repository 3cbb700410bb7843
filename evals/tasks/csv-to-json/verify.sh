python3 - <<'PY' || exit 1
import json, sys
try:
    data = json.load(open("people.json"))
except Exception as e:
    print("people.json:", e); sys.exit(1)
want = [{"name": "Ada", "age": 36}, {"name": "Grace", "age": 45}, {"name": "Alan", "age": 41}, {"name": "Katherine", "age": 101}]
if data != want:
    print("people.json holds", data); sys.exit(1)
PY
