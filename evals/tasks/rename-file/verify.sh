test ! -e notes.txt || { echo "notes.txt still exists"; exit 1; }
cmp -s NOTES.md "$TASK_DIR/files/notes.txt" || { echo "NOTES.md differs from the old notes.txt"; exit 1; }
