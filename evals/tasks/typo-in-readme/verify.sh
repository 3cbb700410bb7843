grep -qx "receive from the file, not counting the header." README.md || { echo "recieve not fixed: $(grep -n 'from the file' README.md)"; exit 1; }
[ "$(grep -v '^receive from the file' README.md)" = "$(grep -v '^recieve from the file' "$TASK_DIR/files/README.md")" ] || { echo "other lines changed: $(diff "$TASK_DIR/files/README.md" README.md)"; exit 1; }
cmp -s csvtools.py "$TASK_DIR/files/csvtools.py" || { echo "csvtools.py was changed"; exit 1; }
