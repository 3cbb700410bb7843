from datetime import date

from dates import days_between, fmt_date


def report_header(start, end):
    return f"Report {fmt_date(start)} to {fmt_date(end)} ({days_between(start, end)} days)"


if __name__ == "__main__":
    print(report_header(date(2024, 3, 1), date(2024, 3, 31)))
