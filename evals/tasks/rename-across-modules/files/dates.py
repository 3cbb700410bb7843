"""Date helpers shared by the reports and the emails."""
from datetime import date


def fmt_date(day: date) -> str:
    """date(2024, 3, 5) -> '5 Mar 2024'"""
    return f"{day.day} {day:%b %Y}"


def days_between(start: date, end: date) -> int:
    return (end - start).days
