"""Dates for git: what callers may write (`parse_when`), and how git is told and tells back.

Callers (MCP tools, the commits API) give dates as ISO 8601 or relative phrases ("7 days
ago", "3mo", "yesterday"); git's own approxidate accepts nearly anything and silently reads
nonsense as "now", so dates are parsed here, strictly, and handed to git as one exact format
(`date_range_args`). Git's date arithmetic covers 1970-2099: dates outside are clamped or make
the range empty. `iso_from_git` turns git's raw ``<epoch> <±hhmm>`` pairs (blame's porcelain)
into ISO 8601 with the author's offset, as git's ``%aI`` prints.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta, timezone

from codesearch.errors import InvalidArgument

__all__ = ["date_range_args", "git_date", "iso_from_git", "parse_when"]

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "seconds"),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), "minutes"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "hours"),
    **dict.fromkeys(("d", "day", "days"), "days"),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), "weeks"),
    **dict.fromkeys(("mo", "mon", "mos", "month", "months"), "months"),
    **dict.fromkeys(("y", "yr", "yrs", "year", "years"), "years"),
}
_RELATIVE = re.compile(r"(?:(\d{1,9})\s*|(an?)\s+)([a-z]+)(?:\s+ago)?")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_WHEN_EXAMPLES = (
    "use an ISO 8601 date or time such as '2024-01-31' or '2024-01-31T10:00:00Z', "
    "or a relative one such as '7 days ago', '2 weeks', '3mo', 'yesterday'"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GIT_DATE_END = datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC)  # git's date arithmetic covers 1970-2099


def _minus_months(t: datetime, n: int) -> datetime:
    y, m = divmod(t.year * 12 + (t.month - 1) - n, 12)
    day = min(t.day, calendar.monthrange(y, m + 1)[1]) if 1 <= y <= 9999 else t.day
    return t.replace(year=y, month=m + 1, day=day)


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """A point in time (aware, UTC) from an ISO 8601 or relative description.

    Accepted (case-insensitive, surrounding spaces ignored):

    * ISO 8601 dates and times: ``2024-01-31`` (midnight UTC), ``2024-01-31T10:00:00Z``,
      ``2024-01-31 10:00``, ``2024-01-31T10:00:00+02:00``; a time without an offset is UTC;
    * ``now``; ``today`` and ``yesterday``: midnight UTC at the start of that day;
    * ``N <unit> [ago]``, also ``a``/``an`` for 1 (``an hour ago``) and without a space
      (``30d``), always in the past. Units: ``s``/``sec``/``second``, ``min``/``minute``,
      ``h``/``hr``/``hour``, ``d``/``day``, ``w``/``wk``/``week``, ``mo``/``month``,
      ``y``/``yr``/``year`` (plurals too). Months and years are calendar months and years
      (Mar 31 minus 1 month is Feb 28/29). A bare ``m`` is refused as ambiguous (``min`` or ``mo``).

    `now` (default: the current time; naive means UTC) anchors the relative forms.
    InvalidArgument, with examples of valid values, for anything else.
    """
    raw = text if isinstance(text, str) else ""
    s = raw.strip().lower()
    now = now or datetime.now(UTC)
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    if not s:
        raise InvalidArgument(f"empty date: {_WHEN_EXAMPLES}")
    if s == "now":
        return now
    if s in ("today", "yesterday"):
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return day - timedelta(days=1) if s == "yesterday" else day
    if s[0].isdigit() and not _RELATIVE.fullmatch(s):
        try:
            t = datetime.fromisoformat(raw.strip().upper())
        except ValueError:
            pass
        else:
            return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    m = _RELATIVE.fullmatch(s)
    if m:
        n = int(m.group(1)) if m.group(1) else 1
        unit = _UNITS.get(m.group(3))
        if m.group(3) == "m":
            raise InvalidArgument(
                f"ambiguous date {raw!r}: write 'min' for minutes or 'mo' for months (e.g. '{n}min', '{n}mo')"
            )
        if unit:
            try:
                if unit == "months":
                    return _minus_months(now, n)
                if unit == "years":
                    return _minus_months(now, 12 * n)
                return now - timedelta(**{unit: n})
            except (OverflowError, ValueError):
                raise InvalidArgument(f"date {raw!r} is too far in the past") from None
    raise InvalidArgument(f"cannot read {raw!r} as a date: {_WHEN_EXAMPLES}")


def git_date(t: datetime) -> str:
    """`t` in the one format we hand git (``2024-01-31 10:00:00 +0000``, UTC)."""
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S +0000")


def date_range_args(since: str | None, until: str | None) -> list[str] | None:
    """``--since`` / ``--until`` options for `parse_when` dates, both inclusive (a bare date for
    `until` includes that whole day); None when no commit can match (`until` before 1970)."""
    args = []
    if since:
        t = parse_when(since)
        if t > _EPOCH:  # (an earlier date: every commit is after it)
            args.append(f"--since={git_date(min(t, _GIT_DATE_END))}")
    if until:
        t = parse_when(until)
        if _DATE_ONLY.fullmatch(until.strip()):  # a whole day: up to its last second
            t += timedelta(days=1, seconds=-1)
        if t < _EPOCH:
            return None
        if t < _GIT_DATE_END:  # (a later date: every commit is before it)
            args.append(f"--until={git_date(t)}")
    return args


def iso_from_git(epoch: str, tz: str) -> str:
    """A raw git time and offset (``1705000000``, ``+0200``) as git's ``%aI`` ('' if unreadable)."""
    try:
        sign = -1 if tz.startswith("-") else 1
        offset = timedelta(hours=int(tz[1:3]), minutes=int(tz[3:5])) * sign
        return datetime.fromtimestamp(int(epoch), timezone(offset)).isoformat()
    except (ValueError, OverflowError, OSError):
        return ""
