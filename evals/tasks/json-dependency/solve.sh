python3 - <<'PY'
import json
p = json.load(open("package.json"))
p["dependencies"]["lodash"] = "^4.17.21"
json.dump(p, open("package.json", "w"), indent=2)
PY
