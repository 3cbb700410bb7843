python3 - <<'PY' || exit 1
import json, sys
p = json.load(open("package.json"))
want = {"react": "^18.3.1", "react-dom": "^18.3.1", "lodash": "^4.17.21"}
if p.get("dependencies") != want or p.get("devDependencies") != {"vite": "^5.4.0"} or p.get("version") != "0.3.0":
    print("package.json is now", p); sys.exit(1)
PY
