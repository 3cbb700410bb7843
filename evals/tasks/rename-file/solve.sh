mv notes.txt NOTES.md
