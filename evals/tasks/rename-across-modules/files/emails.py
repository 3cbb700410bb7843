from datetime import date

import dates


def reminder(name, due):
    return f"Hi {name}, your invoice is due on {dates.fmt_date(due)}."


if __name__ == "__main__":
    print(reminder("Priya", date(2024, 4, 15)))
