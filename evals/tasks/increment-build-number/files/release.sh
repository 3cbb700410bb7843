#!/bin/bash
# Prints the release name from build.json, e.g. fieldnotes-2.1.0+41-beta
python3 - <<'PY'
import json

b = json.load(open("build.json"))
print(f"{b['app']}-{b['version']}+{b['build']}-{b['channel']}")
PY
