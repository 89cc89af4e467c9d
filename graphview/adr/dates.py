"""Dates in ADR attribution lines: "23rd November 2026", "November 23, 2026", "2026-11-23"."""
import datetime
import re

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]
_MONTH = r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
         r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_PATTERNS = [
    re.compile(r"\b(?P<year>\d{4})-(?P<num>\d{2})-(?P<day>\d{2})\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\.?,?\s+(?P<year>\d{{4}})\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\.?\s+{_DAY},?\s+(?P<year>\d{{4}})\b", re.IGNORECASE),
]


class BadDate(ValueError):
    """Text that has the shape of a date but is not a real one (e.g. 31st February)."""


def find_date(text):
    """The first date written in ``text``, or None; raises BadDate for an impossible one."""
    found = [(m.start(), m) for pattern in _PATTERNS for m in [pattern.search(text)] if m]
    if not found:
        return None
    match = min(found, key=lambda item: item[0])[1]
    parts = match.groupdict()
    month = int(parts["num"]) if parts.get("num") else _month_number(parts["month"])
    try:
        return datetime.date(int(parts["year"]), month, int(parts["day"]))
    except ValueError as error:
        raise BadDate(f"{match.group(0)!r} is not a real date ({error})") from None


def _month_number(name):
    name = name.lower()
    return next(i for i, full in enumerate(MONTHS, start=1) if full.startswith(name[:3]))


def long_form(date):
    """The date as the seed writes it: "23rd November 2026"."""
    day = date.day
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix} {MONTHS[date.month - 1].capitalize()} {date.year}"
