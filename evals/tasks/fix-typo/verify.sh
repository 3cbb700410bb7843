grep -qx "## Installation" README.md || { echo "heading not fixed"; exit 1; }
[ "$(grep -vx '## Installation' README.md)" = "$(grep -vx '## Instalation' "$TASK_DIR/files/README.md")" ] || { echo "other lines changed"; exit 1; }
