"""Just enough of ``java.time`` for the interval algorithms: DateTimeFormatter patterns and ChronoUnit steps.

Configurations write Java patterns (``yyyy-MM-dd HH:mm:ss``, suffix ``yyyyMM``); we translate the numeric
subset (y/u, M, d, H, m, s, S and quoted literals) into a formatter and a prefix parser. Text fields
(``MMM``, ``EEE``) and zones are out of scope and rejected at configuration time.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

_FIELDS = {"y": "year", "u": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second",
           "S": "fraction"}  # fmt: skip


@dataclass(frozen=True)
class _Field:
    name: str
    width: int


class JavaDateTimePattern:
    """A compiled DateTimeFormatter pattern (numeric fields only)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.parts: list[str | _Field] = []
        i, n = 0, len(pattern)
        while i < n:
            c = pattern[i]
            if c == "'":
                end = pattern.find("'", i + 1)
                if end < 0:
                    raise ValueError(f"unterminated quote in pattern {pattern!r}")
                self.parts.append("'" if end == i + 1 else pattern[i + 1 : end])
                i = end + 1
            elif c.isalpha():
                j = i
                while j < n and pattern[j] == c:
                    j += 1
                if c not in _FIELDS or (c == "M" and j - i > 2):
                    raise ValueError(f"unsupported pattern letters {pattern[i:j]!r} in {pattern!r}")
                self.parts.append(_Field(_FIELDS[c], j - i))
                i = j
            else:
                self.parts.append(c)
                i += 1
        regex = []
        for part in self.parts:
            if isinstance(part, str):
                regex.append(re.escape(part))
            elif part.width == 1 and part.name != "fraction":
                regex.append(r"(\d{1,2})" if part.name != "year" else r"(\d{1,9})")
            elif part.name == "year" and part.width > 2:
                regex.append(rf"(\d{{{part.width},9}})")
            else:
                regex.append(rf"(\d{{{part.width}}})")
        self._regex = re.compile("".join(regex))
        self.fields = [p for p in self.parts if isinstance(p, _Field)]

    def format(self, value: datetime) -> str:
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            elif part.name == "fraction":
                out.append(f"{value.microsecond:06d}000"[: part.width].ljust(part.width, "0"))
            elif part.name == "year" and part.width == 2:
                out.append(f"{value.year % 100:02d}")
            else:
                out.append(f"{getattr(value, part.name):0{part.width}d}")
        return "".join(out)

    def parse(self, text: str) -> datetime | None:
        """Parse a prefix of ``text`` (ShardingSphere cuts values to the pattern's length); None if no match.

        Fields the pattern lacks default to the start of their period (month 1, day 1, 00:00:00).
        """
        m = self._regex.match(text)
        if not m:
            return None
        values = {"year": 2000, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "microsecond": 0}
        for part, group in zip(self.fields, m.groups(), strict=True):
            if part.name == "fraction":
                values["microsecond"] = int((group + "000000")[:6])
            elif part.name == "year" and part.width == 2:
                values["year"] = 2000 + int(group)
            else:
                values[part.name] = int(group)
        try:
            return datetime(**values)
        except ValueError:
            return None


def add_months(value: datetime, months: int) -> datetime:
    """``LocalDateTime.plusMonths``: the day is clamped to the end of the target month."""
    total = value.year * 12 + (value.month - 1) + months
    year, month = divmod(total, 12)
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


_FIXED_UNITS = {
    "MICROS": timedelta(microseconds=1),
    "MILLIS": timedelta(milliseconds=1),
    "SECONDS": timedelta(seconds=1),
    "MINUTES": timedelta(minutes=1),
    "HOURS": timedelta(hours=1),
    "HALF_DAYS": timedelta(hours=12),
    "DAYS": timedelta(days=1),
    "WEEKS": timedelta(weeks=1),
}
_MONTH_UNITS = {"MONTHS": 1, "YEARS": 12, "DECADES": 120, "CENTURIES": 1200, "MILLENNIA": 12000}
CHRONO_UNITS = frozenset(_FIXED_UNITS) | frozenset(_MONTH_UNITS)


def plus(value: datetime, amount: int, unit: str) -> datetime:
    """``LocalDateTime.plus(amount, ChronoUnit.<unit>)``."""
    if unit in _MONTH_UNITS:
        return add_months(value, amount * _MONTH_UNITS[unit])
    return value + _FIXED_UNITS[unit] * amount


def to_datetime(value: object, pattern: JavaDateTimePattern | None = None) -> datetime | None:
    """A SQL value as a datetime: datetime/date objects directly, strings by ``pattern`` first, then by the
    ISO-like forms MySQL accepts (``2024-01-31``, ``2024-01-31 10:00:00[.ffffff]``). None when neither."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str):
        return None
    text = value.strip()
    if pattern is not None:
        parsed = pattern.parse(text)
        if parsed is not None:
            return parsed
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
