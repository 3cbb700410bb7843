if grep -rn "fmt_date" --include='*.py' .; then echo "fmt_date still present"; exit 1; fi
grep -q "^def format_date(day: date) -> str:" dates.py || { echo "no def format_date in dates.py"; exit 1; }
[ "$(python3 reports.py 2>&1)" = "Report 1 Mar 2024 to 31 Mar 2024 (30 days)" ] || { echo "reports.py prints: $(python3 reports.py 2>&1 | tail -3)"; exit 1; }
[ "$(python3 emails.py 2>&1)" = "Hi Priya, your invoice is due on 15 Apr 2024." ] || { echo "emails.py prints: $(python3 emails.py 2>&1 | tail -3)"; exit 1; }
for f in dates.py reports.py emails.py; do
  [ "$(sed 's/fmt_date/format_date/g' "$TASK_DIR/files/$f")" = "$(cat $f)" ] || { echo "$f has other changes: $(sed 's/fmt_date/format_date/g' "$TASK_DIR/files/$f" | diff - $f)"; exit 1; }
done
