cmp -s backup/a.txt docs/a.txt && cmp -s backup/b.txt docs/b.txt || { echo "backup/ lacks the .txt files"; exit 1; }
test ! -e backup/c.md || { echo "backup/ has c.md"; exit 1; }
rm -rf backup && bash backup.sh >/dev/null 2>&1 && cmp -s backup/a.txt docs/a.txt || { echo "backup.sh still fails"; exit 1; }
