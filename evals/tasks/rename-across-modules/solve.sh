sed -i 's/fmt_date/format_date/g' dates.py reports.py emails.py
