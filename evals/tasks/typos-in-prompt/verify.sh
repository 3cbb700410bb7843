python3 - <<'PY' || exit 1
import json, sys
s = json.load(open("settings.json"))
want = {"theme": "light", "default_color": "blue", "border_color": "red", "font_size": 14, "show_grid": False}
if s != want:
    print("settings.json is now", s); sys.exit(1)
PY
cmp -s draw.py "$TASK_DIR/files/draw.py" || { echo "draw.py was changed"; exit 1; }
