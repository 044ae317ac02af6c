"""PostgreSQL's date and time semantics, for expressions the rewriter evaluates itself.

The companion of :mod:`rewriter.pgeval` for ``date``, ``timestamp``, ``timestamp with time
zone`` and ``interval`` (PostgreSQL 16): input of literals, casts, comparisons, arithmetic
(``d + 7``, ``d + INTERVAL '1 day'``, ``ts - ts``, ``interval * 3``), ``date_trunc`` of
every granularity, ``extract``/``date_part`` of every field (``numeric`` and ``double
precision`` results, with PostgreSQL's scales), ``to_char`` with PostgreSQL's template
patterns, ``to_timestamp``, ``to_date``, ``make_date``/``make_timestamp``/
``make_timestamptz``/``make_interval``, ``date_bin``, ``AT TIME ZONE``. Each is evaluated over
public values only: the declared values of a date column, constants, and noisy answers.
``tests/rewriter/test_pgtime.py`` diffs them against the real server, in several time zones.

Values are Python values:

- ``date``: :class:`datetime.date`;
- ``timestamp``: a naive :class:`datetime.datetime` (microseconds, as PostgreSQL);
- ``timestamp with time zone``: an aware :class:`datetime.datetime` whose ``tzinfo`` is a
  :class:`Zoned` offset: the UTC offset the session's time zone has at that instant,
  remembering the zone's name. The wall time is then the local time PostgreSQL shows, the
  instant is exact (two values compare and hash by instant, also in the repeated hour of a
  fall-back transition), and operations that need the zone's rules (adding a day across a
  daylight-saving change, truncating to a day) find them in the value;
- ``interval``: :class:`Interval` (months, days, microseconds, as PostgreSQL keeps them).

**The session's TimeZone is public.** A ``timestamp with time zone`` made from something
else (a date, ``date_trunc`` of a date, ``to_timestamp(epoch)``, a literal) needs it; the
rewriter receives it as an argument of ``rewriter.classify`` (the proxy passes the
session's ``TimeZone`` parameter, which PostgreSQL reports to the client) and writes it into
each such operation as an argument (:data:`ZONED`), so plans carry it and nothing is read
from the environment.

Errors PostgreSQL raises for a value are :class:`rewriter.pgtypes.EvalError` with its
SQLSTATE; input PostgreSQL would read but the proxy does not (dates in words, time zone
abbreviations, ``'now'``) is :class:`Unsupported` (0A000), never a guess.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import TypeVar
from zoneinfo import ZoneInfo, available_timezones

from dp.errors import InternalError

from . import pgtypes
from .pgtypes import EvalError, TypeMismatch

DATE, TS, TSTZ, INTERVAL = "date", "timestamp", "timestamptz", "interval"
#: The types this module owns.
TYPES = frozenset({DATE, TS, TSTZ, INTERVAL})
#: Types a date or timestamp can be compared with or converted to implicitly.
DATETIMES = frozenset({DATE, TS, TSTZ})

_USEC = 1_000_000
_DAY_US = 86_400 * _USEC
_UNIX = dt.datetime(1970, 1, 1)
_UNIX_ORD = dt.date(1970, 1, 1).toordinal()
_JULIAN_OFFSET = 1721425  # date2j(d) = d.toordinal() + 1721425


#: The session's TimeZone while a statement is classified (:func:`session_zone`).
SESSION_ZONE: ContextVar[str] = ContextVar("lapras_session_zone", default="UTC")


@contextmanager
def session_zone(name: str) -> Iterator[None]:
    """Classify under the session's TimeZone ``name`` (checked first: a zone the proxy does
    not evaluate refuses the statements that need it, not the others)."""
    token = SESSION_ZONE.set(name or "UTC")
    try:
        yield
    finally:
        SESSION_ZONE.reset(token)


class Unsupported(EvalError):
    """Input or an operation PostgreSQL evaluates and the proxy does not (0A000)."""

    def __init__(self, message: str) -> None:
        super().__init__("0A000", message)


# --- intervals --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Interval:
    """PostgreSQL's interval: months, days and microseconds, kept apart (a month is not 30
    days when added to a date). Compared, as PostgreSQL compares them, by their span with a
    month of 30 days and a day of 24 hours ('1 mon' = '30 days')."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def span(self) -> int:
        return (self.months * 30 + self.days) * _DAY_US + self.micros

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and self.span() == other.span()

    def __hash__(self) -> int:
        return hash(("interval", self.span()))

    def __lt__(self, other: Interval) -> bool:
        return self.span() < other.span()

    def __le__(self, other: Interval) -> bool:
        return self.span() <= other.span()

    def __gt__(self, other: Interval) -> bool:
        return self.span() > other.span()

    def __ge__(self, other: Interval) -> bool:
        return self.span() >= other.span()

    def __neg__(self) -> Interval:
        return Interval(months=-self.months, days=-self.days, micros=-self.micros)

    def __repr__(self) -> str:
        return f"Interval({interval_text(self)!r})"


# --- time zones -------------------------------------------------------------------------------


class Zoned(dt.tzinfo):
    """A fixed UTC offset taken from a named time zone at one instant (see the module
    docstring): ``utcoffset`` is the offset, ``name`` the zone whose rules apply to
    arithmetic and truncation. One object per (zone, offset)."""

    __slots__ = ("name", "offset")

    def __init__(self, name: str, offset: dt.timedelta) -> None:
        self.name = name
        self.offset = offset

    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        return self.offset

    def dst(self, d: dt.datetime | None) -> dt.timedelta | None:
        return None

    def tzname(self, d: dt.datetime | None) -> str | None:
        if d is None:
            return None
        rules = zone(self.name)
        return (
            (d.replace(tzinfo=None) - self.offset).replace(tzinfo=dt.UTC).astimezone(rules).tzname()
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (zoned, (self.name, self.offset))

    def __repr__(self) -> str:
        return f"Zoned({self.name!r}, {self.offset!r})"


@lru_cache(maxsize=4096)
def zoned(name: str, offset: dt.timedelta) -> Zoned:
    return Zoned(name, offset)


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    names = {n.lower(): n for n in available_timezones()}
    names.setdefault("utc", "UTC")
    return names


_POSIX = re.compile(r"^(?:<([^<>]*)>|([A-Za-z]{3,}))?([+-]?)(\d{1,2})(?::(\d{2})(?::(\d{2}))?)?$")


@lru_cache(maxsize=256)
def zone(name: str) -> dt.tzinfo:
    """The rules of a time zone named as PostgreSQL reports the session's ``TimeZone``: an
    IANA name (any case), or a POSIX offset without daylight saving (``<+02>-02``, the form
    PostgreSQL reports for ``SET TimeZone = '+2'``; POSIX counts hours west of Greenwich)."""
    key = name.strip()
    canonical = _zone_names().get(key.lower())
    if canonical is not None:
        return ZoneInfo(canonical)
    m = _POSIX.match(key)
    if m is not None:
        west = int(m.group(4)) * 3600 + int(m.group(5) or 0) * 60 + int(m.group(6) or 0)
        if m.group(3) == "-":
            west = -west
        abbr = m.group(1) if m.group(1) is not None else m.group(2)
        if abs(west) < 24 * 3600:
            # the abbreviation to_char's TZ shows: the name before the offset
            return dt.timezone(dt.timedelta(seconds=-west), abbr or key)
    raise Unsupported(
        f'time zone "{name}" is not evaluated by the proxy (use an IANA name such as '
        "'UTC' or 'Europe/Paris')"
    )


def check_zone(name: str) -> str:
    """``name`` if it names a zone the proxy evaluates (else :class:`Unsupported`)."""
    zone(name)
    return name


_EXPLICIT = re.compile(r"^[A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)+$|^(?:UTC|GMT|Z)$", re.IGNORECASE)
#: PostgreSQL's DecodeTimezone: a numeric offset in ISO 8601's sign (east of Greenwich).
_ISO_OFFSET = re.compile(r"^([+-])(\d+)(?::(\d+)(?::(\d+))?)?$")


def _fixed(east: int, label: str) -> str:
    """The name :func:`zone` reads as a fixed offset ``east`` seconds east of Greenwich (the
    POSIX form, which counts westward: ``<+05:30>-05:30``)."""
    west = -east
    a = abs(west)
    h, rest = divmod(a, 3600)
    mi, sec = divmod(rest, 60)
    return f"<{label}>{'-' if west < 0 else '+'}{h:02d}:{mi:02d}:{sec:02d}"


def _iso_offset(text_: str) -> str | None:
    """``'+05:30'``, ``'-3'``, ``'+0530'`` read by DecodeTimezone (hours east), as a zone name;
    None when ``text_`` is not of that form."""
    m = _ISO_OFFSET.match(text_)
    if m is None:
        return None
    hr, mi, sec = int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0)
    if m.group(3) is None and len(text_) > 3:  # run together: +0530
        hr, mi = divmod(hr, 100)
    if hr > 15 or mi >= 60 or sec >= 60:
        raise EvalError("22009", f'time zone displacement out of range: "{text_}"')
    east = (hr * 60 + mi) * 60 + sec
    return _fixed(-east if m.group(1) == "-" else east, text_)


def explicit_zone(name: object, *, iso: bool = False) -> str:
    """A zone written in a statement, as PostgreSQL reads it (``AT TIME ZONE z``, the third
    argument of ``date_trunc``: DecodeTimezoneName; ``iso``: the seventh of
    ``make_timestamptz``, parse_sane_timezone):

    - an IANA name (any case), ``UTC``, ``GMT``, ``Z``;
    - a numeric offset in POSIX's sign, counted **westward** (``'+05:30'`` is UTC-05:30,
      ``'UTC+3'`` UTC-03:00, ``'<+03>-03'`` UTC+03:00), as PostgreSQL reads it there;
      with ``iso``, an offset that starts with its sign is ISO 8601's, eastward (``'+05:30'``
      is UTC+05:30), and one that starts with a digit is PostgreSQL's error;
    - an ``interval`` (``AT TIME ZONE INTERVAL '05:30'``): eastward, without months or days.

    Abbreviations (``'CET'``, ``'EST'``) are refused: PostgreSQL reads them as fixed offsets
    from its abbreviation table (``'CET'`` is +01 all year there, where the IANA zone CET has
    summer time), which the proxy does not hold."""
    if isinstance(name, Interval):
        if name.months or name.days:
            raise EvalError(
                "22023",
                f'interval time zone "{interval_text(name)}" must not include months or days',
            )
        return _fixed(int(name.micros / _USEC), interval_text(name))
    if not isinstance(name, str):
        raise Unsupported(f"time zone {name!r} is not evaluated by the proxy")
    key = name.strip()
    if key.upper() in ("UTC", "GMT", "Z"):
        return "UTC"
    if iso and key[:1].isdigit():
        raise EvalError("22023", f'invalid input syntax for type numeric time zone: "{key}"')
    if iso and key[:1] in "+-":
        fixed = _iso_offset(key)
        if fixed is not None:
            return fixed
    if _EXPLICIT.match(key) or (
        any(ch.isdigit() for ch in key) and (key.lower() in _zone_names() or _POSIX.match(key))
    ):
        return check_zone(key)
    raise Unsupported(
        f"time zone {name!r} is not evaluated by the proxy: PostgreSQL reads it as an "
        "abbreviation with a fixed offset; name an IANA zone such as 'Europe/Paris', 'UTC', "
        "or an offset ('+05:30' is UTC-05:30 there, as POSIX counts; INTERVAL '05:30' is "
        "UTC+05:30)"
    )


def localize(naive: dt.datetime, zone_name: str) -> dt.datetime:
    """A local time in ``zone_name`` as a ``timestamp with time zone`` (shown in that
    zone). PostgreSQL's rule at transitions (DetermineTimeZoneOffset): a time skipped by a
    spring-forward takes the offset before the change, a time repeated by a fall-back the
    offset after it; both are the smaller of the two offsets."""
    rules = zone(zone_name)
    o0 = naive.replace(tzinfo=rules, fold=0).utcoffset()
    o1 = naive.replace(tzinfo=rules, fold=1).utcoffset()
    assert o0 is not None and o1 is not None
    return show(_checked(lambda: (naive - min(o0, o1)).replace(tzinfo=dt.UTC)), zone_name)


def show(instant: dt.datetime, zone_name: str) -> dt.datetime:
    """An aware datetime as the same instant shown in ``zone_name``."""
    local = _checked(lambda: instant.astimezone(zone(zone_name)))
    off = local.utcoffset()
    assert off is not None
    return local.replace(tzinfo=zoned(zone_name, off), fold=0)


def _zone_of(v: dt.datetime) -> str:
    tz = v.tzinfo
    return tz.name if isinstance(tz, Zoned) else "UTC"


def _wall(v: dt.datetime) -> dt.datetime:
    """The local wall time of a timestamp (itself) or of a timestamptz (in its zone)."""
    if v.tzinfo is None:
        return v
    if not isinstance(v.tzinfo, Zoned):
        v = show(v, "UTC")
    return v.replace(tzinfo=None)


def _checked(f: Callable[[], dt.datetime]) -> dt.datetime:
    try:
        return f()
    except (OverflowError, ValueError):
        raise Unsupported(
            "a date or timestamp outside the years 1 to 9999 is not evaluated by the proxy"
        ) from None


# --- input ------------------------------------------------------------------------------------

_DATETIME = re.compile(
    r"""^\s*
    (?:(?P<y>\d{4,5})-(?P<m>\d{1,2})-(?P<d>\d{1,2})|(?P<c>\d{8}))
    (?:(?:[Tt]|\s+)(?P<H>\d{1,2}):(?P<M>\d{1,2})(?::(?P<S>\d{1,2})(?:\.(?P<f>\d*))?)?)?
    \s*(?P<z>[Zz]|(?i:UTC|GMT)|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)?
    \s*$""",
    re.VERBOSE,
)
_SPECIAL = ("now", "today", "tomorrow", "yesterday", "infinity", "-infinity", "+infinity")


@dataclass(frozen=True, slots=True)
class _Parsed:
    day: dt.date
    micros: int  # since midnight
    offset: dt.timedelta | None  # east of UTC, when the text gives one


def _parse(text: str, typename: str) -> _Parsed:
    """PostgreSQL's date/time input in its ISO 8601 forms (``YYYY-MM-DD``, ``YYYYMMDD``,
    with an optional ``T`` or space, ``HH:MM[:SS[.ffffff]]`` and a zone ``Z``, ``UTC``,
    ``+HH[:MM]``); ``'epoch'``."""
    t = text.strip()
    low = t.lower()
    if low == "epoch":
        return _Parsed(dt.date(1970, 1, 1), 0, dt.timedelta(0))
    if low in _SPECIAL:
        raise Unsupported(
            f"the special value '{t}' for type {typename} is not evaluated by the proxy: "
            "write a date, 'YYYY-MM-DD' ('infinity' and '-infinity' are evaluated only "
            "compared with a date or timestamp, x < 'infinity'; 'now' and 'today' read the "
            "clock: write the date)"
        )
    m = _DATETIME.match(t)
    if m is None:
        if re.search(r"[A-SU-Ya-su-y]", t):  # month or zone names, BC/AD ...
            raise Unsupported(
                f'the {typename} "{t}" is not evaluated by the proxy: write it in ISO 8601, '
                "'YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH:MM]'"
            )
        raise EvalError("22007", f'invalid input syntax for type {typename}: "{t}"')
    if m.group("c"):
        c = m.group("c")
        y, mo, d = int(c[:4]), int(c[4:6]), int(c[6:])
    else:
        y, mo, d = int(m.group("y")), int(m.group("m")), int(m.group("d"))
    hh, mi, ss = int(m.group("H") or 0), int(m.group("M") or 0), int(m.group("S") or 0)
    frac = m.group("f") or ""
    micros = round(float("0." + frac) * _USEC) if frac else 0
    if y < 1 or y > 9999:
        raise Unsupported(f'the {typename} "{t}" is outside the years 1 to 9999')
    if not 1 <= mo <= 12 or not 1 <= d <= _days_in(y, mo):
        raise EvalError("22008", f'date/time field value out of range: "{t}"')
    if hh > 24 or mi > 59 or ss > 59 or (hh == 24 and (mi or ss or micros)):
        raise EvalError("22008", f'date/time field value out of range: "{t}"')
    offset = None
    z = m.group("z")
    if z:
        if z.upper() in ("Z", "UTC", "GMT"):
            offset = dt.timedelta(0)
        else:
            digits = z[1:].replace(":", "")
            h = int(digits[:-2] if len(digits) > 2 else digits)
            rest = digits[-2:] if len(digits) > 2 else "0"
            if len(digits) in (5, 6):  # HHMMSS
                h, rest, sec = int(digits[:-4]), digits[-4:-2], int(digits[-2:])
            else:
                sec = 0
            off = h * 3600 + int(rest) * 60 + sec
            if h > 15:
                raise EvalError("22009", f'time zone displacement out of range: "{t}"')
            offset = dt.timedelta(seconds=off if z[0] == "+" else -off)
    return _Parsed(dt.date(y, mo, d), ((hh * 60 + mi) * 60 + ss) * _USEC + micros, offset)


def _days_in(y: int, m: int) -> int:
    if m == 12:
        return 31
    return (dt.date(y, m + 1, 1) - dt.date(y, m, 1)).days


def parse_date(text: str) -> dt.date:
    """``text::date`` (a time of day and a zone in the text are read and ignored, as
    PostgreSQL does: ``'2010-03-01T00:00:00Z'::date`` is 2010-03-01)."""
    return _parse(text, "date").day


def parse_timestamp(text: str) -> dt.datetime:
    """``text::timestamp`` (a zone in the text is ignored, as PostgreSQL does)."""
    p = _parse(text, "timestamp without time zone")
    return _checked(
        lambda: dt.datetime.combine(p.day, dt.time()) + dt.timedelta(microseconds=p.micros)
    )


def parse_timestamptz(text: str, zone_name: str) -> dt.datetime:
    """``text::timestamptz``: the text's own offset, else local time in ``zone_name``."""
    p = _parse(text, "timestamp with time zone")
    naive = _checked(
        lambda: dt.datetime.combine(p.day, dt.time()) + dt.timedelta(microseconds=p.micros)
    )
    if p.offset is None:
        return localize(naive, zone_name)
    return show(_checked(lambda: (naive - p.offset).replace(tzinfo=dt.UTC)), zone_name)  # type: ignore[operator]


_IV_UNITS: dict[str, tuple[str, int]] = {}
for _names, _iv_unit in (
    (("microsecond", "microseconds", "us", "usec", "usecs", "microsecon"), ("us", 1)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs", "millisecon"), ("us", 1000)),
    (("second", "seconds", "s", "sec", "secs"), ("us", _USEC)),
    (("minute", "minutes", "m", "min", "mins"), ("us", 60 * _USEC)),
    (("hour", "hours", "h", "hr", "hrs"), ("us", 3600 * _USEC)),
    (("day", "days", "d"), ("day", 1)),
    (("week", "weeks", "w"), ("day", 7)),
    (("month", "months", "mon", "mons"), ("mon", 1)),
    (("year", "years", "y", "yr", "yrs"), ("mon", 12)),
    (("decade", "decades", "dec", "decs"), ("mon", 120)),
    (("century", "centuries", "c", "cent"), ("mon", 1200)),
    (("millennium", "millennia", "mil", "mils"), ("mon", 12000)),
):
    for _n in _names:
        _IV_UNITS[_n] = _iv_unit

_IV_TOKEN = re.compile(
    r"\s*(?:(?P<time>[+-]?\s*\d+:\d{1,2}(?::\d{1,2}(?:\.\d*)?)?)|(?P<num>[+-]?\s*(?:\d+\.?\d*|\.\d+))"
    r"\s*(?P<unit>[A-Za-z]+)?|(?P<word>[A-Za-z@]+))"
)


def parse_interval(text: str, unit: str = "") -> Interval:
    """``text::interval`` in PostgreSQL's own form: ``[@] n unit [n unit ...] [[-]HH:MM[:SS]]
    [ago]`` (units from microseconds to millennia, plural or abbreviated; a fraction carried
    down as PostgreSQL does: ``'1.5 days'`` is 1 day 12:00:00); ``unit``: the SQL qualifier
    after the string (``INTERVAL '3' DAY``), which names the unit of a bare number."""
    t = text.strip()
    if (t.startswith(("P", "p")) and len(t) > 1 and t[1:2].isdigit()) or t[:2].upper() == "PT":
        raise Unsupported(f"ISO 8601 interval '{t}' is not evaluated by the proxy: write '1 day'")
    qual = unit.strip().lower()
    if qual and (" to " in qual or qual not in _IV_UNITS):
        raise Unsupported(
            f"INTERVAL '{t}' {unit} is not evaluated by the proxy: write INTERVAL '{t} {qual}'"
        )
    months = days = 0
    micros = 0.0
    pos = 0
    seen = False
    ago = False
    while pos < len(t):
        m = _IV_TOKEN.match(t, pos)
        if m is None or m.end() == pos:
            raise EvalError("22007", f'invalid input syntax for type interval: "{t}"')
        pos = m.end()
        if m.group("word"):
            w = m.group("word").lower()
            if w == "@" and not seen:
                continue
            if w == "ago" and pos >= len(t.rstrip()):
                ago = True
                continue
            raise EvalError("22007", f'invalid input syntax for type interval: "{t}"')
        seen = True
        if m.group("time"):
            tm = re.sub(r"\s+", "", m.group("time"))
            neg = tm.startswith("-")
            parts = tm.lstrip("+-").split(":")
            secs = float(parts[2]) if len(parts) > 2 else 0.0
            us = (int(parts[0]) * 3600 + int(parts[1]) * 60) * _USEC + round(secs * _USEC)
            micros += -us if neg else us
            continue
        num = re.sub(r"\s+", "", m.group("num"))  # PostgreSQL skips spaces after a sign
        name = (m.group("unit") or qual or "second").lower()
        if name not in _IV_UNITS:
            raise EvalError("22007", f'invalid input syntax for type interval: "{t}"')
        kind, scale = _IV_UNITS[name]
        whole = int(Decimal(num).to_integral_value(rounding="ROUND_DOWN"))
        frac = float(Decimal(num) - whole)
        if kind == "mon":
            months += whole * scale
            if frac:
                if scale >= 12:  # years and up: whole months, rounded
                    months += round(frac * scale)
                else:  # a fraction of a month: days of 30, then seconds
                    fd = frac * 30
                    days += int(fd)
                    micros += round((fd - int(fd)) * 86400 * _USEC)
        elif kind == "day":
            days += whole * scale
            if frac:
                fd = frac * scale
                days += int(fd)
                micros += round((fd - int(fd)) * 86400 * _USEC)
        else:
            micros += whole * scale + round(frac * scale)
    if not seen:
        raise EvalError("22007", f'invalid input syntax for type interval: "{t}"')
    iv = Interval(months=months, days=days, micros=int(micros))
    return -iv if ago else iv


# --- output -----------------------------------------------------------------------------------


def _time_text(micros: int) -> str:
    s, us = divmod(micros, _USEC)
    h, rem = divmod(s, 3600)
    mi, sec = divmod(rem, 60)
    out = f"{h:02d}:{mi:02d}:{sec:02d}"
    if us:
        out += f".{us:06d}".rstrip("0")
    return out


def _offset_text(off: dt.timedelta) -> str:
    secs = int(off.total_seconds())
    sign = "+" if secs >= 0 else "-"
    h, rem = divmod(abs(secs), 3600)
    mi, s = divmod(rem, 60)
    out = f"{sign}{h:02d}"
    if mi or s:
        out += f":{mi:02d}"
    if s:
        out += f":{s:02d}"
    return out


def interval_text(v: Interval) -> str:
    """interval output with ``IntervalStyle = postgres`` (the default; EncodeInterval): each
    nonzero part with its unit, plural unless it is exactly 1 (``-1 days``), a positive part
    after a negative one with its ``+``, the time last (``-1 days +04:00:00``)."""
    parts = []
    before = False  # the last part written was negative
    years, mons = int(v.months / 12), v.months - 12 * int(v.months / 12)
    for n, unit in ((years, "year"), (mons, "mon"), (v.days, "day")):
        if n:
            parts.append(f"{'+' if before and n > 0 else ''}{n} {unit}{'' if n == 1 else 's'}")
            before = n < 0
    if v.micros or not parts:
        body = _time_text(abs(v.micros))
        parts.append(("-" if v.micros < 0 else "+" if before else "") + body)
    return " ".join(parts)


def text(v: object) -> str:
    """PostgreSQL's text output (DateStyle ISO) of a date, timestamp, timestamptz or interval."""
    if isinstance(v, Interval):
        return interval_text(v)
    if isinstance(v, dt.datetime):
        wall = _wall(v)
        out = wall.strftime("%Y-%m-%d %H:%M:%S")
        if wall.microsecond:
            out += f".{wall.microsecond:06d}".rstrip("0")
        if v.tzinfo is not None:
            off = v.utcoffset()
            assert off is not None
            out += _offset_text(off)
        return out
    assert isinstance(v, dt.date)
    return v.isoformat()


# --- casts ------------------------------------------------------------------------------------


def _midnight(d: dt.date) -> dt.datetime:
    return dt.datetime(d.year, d.month, d.day)


def _round_precision(v: dt.datetime, precision: int) -> dt.datetime:
    """A timestamp rounded to ``precision`` fractional digits (timestamp(p)): half away from
    zero, as AdjustTimestampForTypmod."""
    if precision >= 6:
        return v
    scale = 10 ** (6 - precision)
    us = v.microsecond
    r = (us + scale // 2) // scale * scale
    return _checked(lambda: v.replace(microsecond=0) + dt.timedelta(microseconds=r))


def cast(
    v: object, src: str, dst: str, typmod: Sequence[int] = (), zone_name: str = "UTC"
) -> object:
    """``v::dst`` for a source or target type of this module (``zone_name``: the session's
    TimeZone, for conversions into ``timestamp with time zone``)."""
    if v is None:
        return None
    if dst in pgtypes.TEXTS or dst == "text":
        if isinstance(v, dt.date | Interval):
            s = text(v)
            if typmod and dst in ("varchar", "bpchar"):
                s = s[: typmod[0]].ljust(typmod[0] if dst == "bpchar" else 0)
            return s
        raise InternalError("a cast to text of a value that is not a date or time")
    if isinstance(v, str):
        if dst == DATE:
            return parse_date(v)
        if dst == TS:
            return _round_precision(parse_timestamp(v), typmod[0]) if typmod else parse_timestamp(v)
        if dst == TSTZ:
            out = parse_timestamptz(v, zone_name)
            return _round_precision(out, typmod[0]) if typmod else out
        if dst == INTERVAL:
            return parse_interval(v)
    if isinstance(v, Interval):
        if dst == INTERVAL:
            return v
    elif isinstance(v, dt.datetime):
        if dst == DATE:
            return _wall(v).date()
        if dst == TS:
            out = _wall(v)
            return _round_precision(out, typmod[0]) if typmod else out
        if dst == TSTZ:
            out = v if v.tzinfo is not None else localize(v, zone_name)
            return _round_precision(out, typmod[0]) if typmod else out
    elif isinstance(v, dt.date):
        if dst == DATE:
            return v
        if dst == TS:
            return _midnight(v)
        if dst == TSTZ:
            return localize(_midnight(v), zone_name)
    raise TypeMismatch(
        f"cannot cast type {pgtypes.sql_type(src)} to {pgtypes.sql_type(dst)}", sqlstate="42846"
    )


def castable(src: str, dst: str) -> bool:
    """Whether PostgreSQL has a cast from ``src`` to ``dst`` (one of them a time type)."""
    if src == dst or src == "unknown" or dst in pgtypes.TEXTS or src in pgtypes.TEXTS:
        return True
    return src in DATETIMES and dst in DATETIMES


def needs_zone(src: str, dst: str) -> bool:
    """Whether ``src::dst`` depends on the session's TimeZone."""
    return dst == TSTZ and src != TSTZ


# --- comparison and common types ------------------------------------------------------------


def promote(a: object, b: object) -> tuple[object, object]:
    """Two date/time values as values of their common type (date < timestamp < timestamptz:
    PostgreSQL's implicit casts; a timestamptz operand gives the zone)."""
    if not (isinstance(a, dt.date) and isinstance(b, dt.date)):
        return a, b
    za = a.tzinfo is not None if isinstance(a, dt.datetime) else None
    zb = b.tzinfo is not None if isinstance(b, dt.datetime) else None
    if za is zb:
        return a, b
    if za or zb:
        name = _zone_of(a if za else b)  # type: ignore[arg-type]
        return cast(a, "", TSTZ, (), name), cast(b, "", TSTZ, (), name)
    return cast(a, "", TS), cast(b, "", TS)


def common(types: Sequence[str]) -> str:
    """The common type of date/time types (CASE, COALESCE, UNION, comparisons)."""
    kinds = set(types)
    if kinds == {INTERVAL}:
        return INTERVAL
    if INTERVAL in kinds:
        raise TypeMismatch(
            "types interval and "
            + pgtypes.sql_type(next(iter(kinds - {INTERVAL})))
            + " cannot be matched",
            sqlstate="42804",
        )
    if TSTZ in kinds:
        return TSTZ
    if TS in kinds:
        return TS
    return DATE


def comparable(a: str, b: str) -> bool:
    return (a in DATETIMES and b in DATETIMES) or a == b == INTERVAL


# --- arithmetic -------------------------------------------------------------------------------


def arith_type(op: str, a: str, b: str) -> str | None:
    """The result type of ``a op b`` when a time type is involved; None when PostgreSQL has no
    such operator."""
    num = pgtypes.NUMBERS
    if op == "+":
        if (a == DATE and b in pgtypes.INTS) or (b == DATE and a in pgtypes.INTS):
            return DATE
        if {a, b} == {DATE, INTERVAL} or {a, b} == {TS, INTERVAL}:
            return TS
        if {a, b} == {TSTZ, INTERVAL}:
            return TSTZ
        if a == b == INTERVAL:
            return INTERVAL
        return None
    if op == "-":
        if a == DATE and b in pgtypes.INTS:
            return DATE
        if a == b == DATE:
            return "int4"
        if a in (DATE, TS) and b == INTERVAL:
            return TS
        if a == TSTZ and b == INTERVAL:
            return TSTZ
        if a == b == INTERVAL:
            return INTERVAL
        if a in DATETIMES and b in DATETIMES:
            return INTERVAL
        return None
    if op == "*" and ((a == INTERVAL and b in num) or (b == INTERVAL and a in num)):
        return INTERVAL
    if op == "/" and a == INTERVAL and b in num:
        return INTERVAL
    return None


def _add_months(wall: dt.datetime, months: int) -> dt.datetime:
    m = wall.year * 12 + wall.month - 1 + months
    y, mo = divmod(m, 12)
    if not 1 <= y <= 9999:
        raise Unsupported(
            "a date or timestamp outside the years 1 to 9999 is not evaluated by the proxy"
        )
    day = min(wall.day, _days_in(y, mo + 1))
    return wall.replace(year=y, month=mo + 1, day=day)


def plus_interval(v: dt.datetime, iv: Interval) -> dt.datetime:
    """timestamp[tz] + interval: months (the day clamped to the month's last), then days, on
    the local calendar (the zone's offset found again after each, for a timestamptz), then
    the time, as elapsed time."""
    if v.tzinfo is None:
        out = _add_months(v, iv.months) if iv.months else v
        out = _checked(lambda: out + dt.timedelta(days=iv.days, microseconds=iv.micros))
        return out
    name = _zone_of(v)
    out = v
    if iv.months:
        out = localize(_add_months(_wall(out), iv.months), name)
    if iv.days:
        wall = _checked(lambda: _wall(out) + dt.timedelta(days=iv.days))
        out = localize(wall, name)
    if iv.micros:
        out = show(_checked(lambda: out + dt.timedelta(microseconds=iv.micros)), name)
    return out


def _justify_hours(micros: int) -> Interval:
    days = int(micros / _DAY_US)
    rest = micros - days * _DAY_US
    if days > 0 and rest < 0:
        rest += _DAY_US
        days -= 1
    elif days < 0 and rest > 0:
        rest -= _DAY_US
        days += 1
    return Interval(days=days, micros=rest)


def _diff_micros(a: dt.datetime, b: dt.datetime) -> int:
    d = a - b
    return (d.days * 86400 + d.seconds) * _USEC + d.microseconds


def _tsround(x: float) -> float:
    return float(round(x * 1e6)) / 1e6


def interval_mul(iv: Interval, factor: float) -> Interval:
    """interval * float8 (PostgreSQL's interval_mul: fractions of months carried down to
    days of 30, fractions of days to seconds)."""
    if math.isnan(factor) or math.isinf(factor):
        raise EvalError("22008", "interval out of range")
    months = int(iv.months * factor)
    days = int(iv.days * factor)
    month_rem_days = _tsround((iv.months * factor - months) * 30)
    sec_rem = _tsround((iv.days * factor - days + month_rem_days - int(month_rem_days)) * 86400)
    if abs(sec_rem) >= 86400:
        days += int(sec_rem / 86400)
        sec_rem -= int(sec_rem / 86400) * 86400
    days += int(month_rem_days)
    micros = round(iv.micros * factor + sec_rem * _USEC)
    return Interval(months=months, days=days, micros=micros)


def interval_div(iv: Interval, factor: float) -> Interval:
    """interval / float8 (PostgreSQL's interval_div)."""
    if factor == 0:
        raise EvalError("22012", "division by zero")
    months = int(iv.months / factor)
    days = int(iv.days / factor)
    month_rem_days = _tsround((iv.months / factor - months) * 30)
    sec_rem = _tsround((iv.days / factor - days + month_rem_days - int(month_rem_days)) * 86400)
    if abs(sec_rem) >= 86400:
        days += int(sec_rem / 86400)
        sec_rem -= int(sec_rem / 86400) * 86400
    days += int(month_rem_days)
    micros = round(iv.micros / factor + sec_rem * _USEC)
    return Interval(months=months, days=days, micros=micros)


def arith(op: str, a: object, b: object, t: str) -> object:
    """``a op b`` with result type ``t`` (from :func:`arith_type`); NULL in, NULL out."""
    if a is None or b is None:
        return None
    if t == DATE:  # date +- integer
        days = b if isinstance(b, int) else a
        base = a if isinstance(a, dt.date) else b
        assert isinstance(days, int) and isinstance(base, dt.date)
        try:
            return base + dt.timedelta(days=days if op == "+" or base is b else -days)
        except OverflowError:
            raise Unsupported(
                "a date outside the years 1 to 9999 is not evaluated by the proxy"
            ) from None
    if t == "int4":  # date - date
        assert isinstance(a, dt.date) and isinstance(b, dt.date)
        return (a - b).days
    if t == INTERVAL:
        if isinstance(a, Interval) and isinstance(b, Interval):
            s = 1 if op == "+" else -1
            return Interval(
                months=a.months + s * b.months,
                days=a.days + s * b.days,
                micros=a.micros + s * b.micros,
            )
        if op == "*":
            iv, k = (a, b) if isinstance(a, Interval) else (b, a)
            assert isinstance(iv, Interval)
            return interval_mul(iv, float(k))  # type: ignore[arg-type]
        if op == "/":
            assert isinstance(a, Interval)
            return interval_div(a, float(b))  # type: ignore[arg-type]
        # datetime - datetime
        assert isinstance(a, dt.date) and isinstance(b, dt.date)
        x, y = promote(a if isinstance(a, dt.datetime) else _midnight(a),
                       b if isinstance(b, dt.datetime) else _midnight(b))  # fmt: skip
        assert isinstance(x, dt.datetime) and isinstance(y, dt.datetime)
        return _justify_hours(_diff_micros(x, y))
    # a datetime +- interval
    if isinstance(a, Interval):
        a, b = b, a
    assert isinstance(a, dt.date) and isinstance(b, Interval)
    base = a if isinstance(a, dt.datetime) else _midnight(a)
    return plus_interval(base, b if op == "+" else -b)


# --- date_trunc -------------------------------------------------------------------------------

#: PostgreSQL's unit words (datetime.c deltatktbl and datetktbl), lower case, to a field.
_UNITS: dict[str, str] = {}
for _field, _words in {
    "microseconds": ("microsecond", "microseconds", "us", "usec", "usecs", "microsecon"),
    "milliseconds": ("millisecond", "milliseconds", "ms", "msec", "msecs", "millisecon"),
    "second": ("second", "seconds", "s", "sec", "secs"),
    "minute": ("minute", "minutes", "m", "min", "mins"),
    "hour": ("hour", "hours", "h", "hr", "hrs"),
    "day": ("day", "days", "d"),
    "week": ("week", "weeks", "w"),
    "month": ("month", "months", "mon", "mons"),
    "quarter": ("quarter", "qtr"),
    "year": ("year", "years", "y", "yr", "yrs"),
    "decade": ("decade", "decades", "dec", "decs"),
    "century": ("century", "centuries", "c", "cent"),
    "millennium": ("millennium", "millennia", "mil", "mils"),
    "epoch": ("epoch",),
    "dow": ("dow",),
    "isodow": ("isodow",),
    "doy": ("doy",),
    "isoyear": ("isoyear",),
    "julian": ("julian", "j"),
    "timezone": ("timezone",),
    "timezone_hour": ("timezone_h", "timezone_hour"),
    "timezone_minute": ("timezone_m", "timezone_minute"),
}.items():
    for _w in _words:
        _UNITS[_w] = _field

_TYPE_WORDS = {
    DATE: "date", TS: "timestamp without time zone", TSTZ: "timestamp with time zone",
    INTERVAL: "interval",
}  # fmt: skip


def _unit(field: object, typ: str) -> str:
    if not isinstance(field, str):
        raise EvalError("22023", "the unit must be text")
    f = _UNITS.get(field.strip().lower())
    if f is None:
        raise EvalError("22023", f'unit "{field}" not recognized for type {_TYPE_WORDS[typ]}')
    return f


_TRUNC = ("microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month",
          "quarter", "year", "decade", "century", "millennium")  # fmt: skip


#: Words date_trunc does not take as units (PostgreSQL finds them among its special words,
#: not its units: "not recognized", 22023); the time zone fields are "not supported" (0A000).
_NOT_UNITS = frozenset({"dow", "doy", "epoch", "isodow", "isoyear", "julian"})


def _trunc_check(field: str, typ: str) -> None:
    if field in _NOT_UNITS:
        raise EvalError("22023", f'unit "{field}" not recognized for type {_TYPE_WORDS[typ]}')
    if field not in _TRUNC:
        raise EvalError("0A000", f'unit "{field}" not supported for type {_TYPE_WORDS[typ]}')


def _trunc_wall(field: str, w: dt.datetime, typ: str) -> dt.datetime:
    _trunc_check(field, typ)
    y = w.year
    if field == "millennium":
        return dt.datetime(((y + 999) // 1000) * 1000 - 999, 1, 1)
    if field == "century":
        return dt.datetime(((y + 99) // 100) * 100 - 99, 1, 1)
    if field == "decade":
        return _checked(lambda: dt.datetime((y // 10) * 10, 1, 1))
    if field == "year":
        return dt.datetime(y, 1, 1)
    if field == "quarter":
        return dt.datetime(y, 3 * ((w.month - 1) // 3) + 1, 1)
    if field == "month":
        return dt.datetime(y, w.month, 1)
    if field == "week":
        return _checked(lambda: _midnight(w.date() - dt.timedelta(days=w.weekday())))
    if field == "day":
        return _midnight(w.date())
    if field == "hour":
        return w.replace(minute=0, second=0, microsecond=0)
    if field == "minute":
        return w.replace(second=0, microsecond=0)
    if field == "second":
        return w.replace(microsecond=0)
    if field == "milliseconds":
        return w.replace(microsecond=w.microsecond // 1000 * 1000)
    return w


_REDO_TZ = frozenset({"week", "day", "month", "quarter", "year", "decade", "century", "millennium"})


def date_trunc(field: object, v: object, *zones: object) -> object:
    """``date_trunc(field, v [, zone])``, the session's zone appended. A date is a timestamptz at local midnight in the
    session's zone (PostgreSQL's implicit cast); a timestamptz is truncated on its local
    calendar (in ``in_zone`` when given) and its offset found again for fields of a day and
    more (timestamptz_trunc_internal); the result is shown in the session's zone."""
    session = zones[-1]
    in_zone = zones[0] if len(zones) == 2 else None
    assert isinstance(session, str)
    if isinstance(v, Interval):
        raise Unsupported("date_trunc of an interval is not evaluated by the proxy")
    assert isinstance(v, dt.date)
    if not isinstance(v, dt.datetime):
        v = localize(_midnight(v), session)
    if v.tzinfo is None and in_zone is None:
        return _trunc_wall(_unit(field, TS), v, TS)
    if v.tzinfo is None:
        v = localize(v, session)
    name = session if in_zone is None else explicit_zone(in_zone)
    wall = _wall(show(v, name))
    f = _unit(field, TSTZ)
    cut = _trunc_wall(f, wall, TSTZ)
    if f in _REDO_TZ:
        return show(localize(cut, name), session)
    off = show(v, name).utcoffset()
    assert off is not None
    return show(_checked(lambda: (cut - off).replace(tzinfo=dt.UTC)), session)


def date_bin(stride: object, v: object, origin: object) -> object:
    """``date_bin(stride, source, origin)`` for timestamps (PostgreSQL 14+)."""
    assert isinstance(stride, Interval)
    if stride.months:
        raise EvalError(
            "22023", "timestamps cannot be binned into intervals containing months or years"
        )
    step = stride.days * _DAY_US + stride.micros
    if step <= 0:
        raise EvalError("22023", "stride must be greater than zero")
    assert isinstance(v, dt.datetime) and isinstance(origin, dt.datetime)
    x, o = promote(v, origin)
    assert isinstance(x, dt.datetime) and isinstance(o, dt.datetime)
    delta = _diff_micros(x, o)
    mod = delta - int(delta / step) * step  # C's %
    out = x - dt.timedelta(microseconds=mod)
    if mod < 0:
        out -= dt.timedelta(microseconds=step)
    return show(out, _zone_of(x)) if out.tzinfo is not None else out


# --- extract / date_part ----------------------------------------------------------------------


def _isoyear(d: dt.date) -> int:
    return d.isocalendar()[0]


def _fields(v: dt.date | dt.datetime) -> dict[str, int]:
    d = v.date() if isinstance(v, dt.datetime) else v
    y = d.year
    return {
        "day": d.day,
        "month": d.month,
        "year": y,
        "quarter": (d.month - 1) // 3 + 1,
        "week": d.isocalendar()[1],
        "decade": y // 10,
        "century": (y + 99) // 100,
        "millennium": (y + 999) // 1000,
        "isoyear": _isoyear(d),
        "dow": d.isoweekday() % 7,
        "isodow": d.isoweekday(),
        "doy": d.timetuple().tm_yday,
    }


def extract(field: object, v: object, *, numeric: bool = True) -> object:
    """``extract(field FROM v)`` (numeric, PostgreSQL 14+) or, with ``numeric`` False,
    ``date_part(field, v)`` (double precision; a date is read as a timestamp there)."""
    if isinstance(v, Interval):
        return _interval_part(field, v, numeric)
    assert isinstance(v, dt.date)
    if not isinstance(v, dt.datetime):
        if not numeric:
            return extract(field, _midnight(v), numeric=False)
        f = _unit(field, DATE)
        base = _fields(v)
        if f in base:
            return Decimal(base[f])
        if f == "epoch":
            return Decimal((v.toordinal() - _UNIX_ORD) * 86400)
        if f == "julian":
            return Decimal(v.toordinal() + _JULIAN_OFFSET)
        raise EvalError("0A000", f'unit "{field}" not supported for type date')
    typ = TSTZ if v.tzinfo is not None else TS
    f = _unit(field, typ)
    w = _wall(v)
    base = _fields(w)
    sec_us = w.second * _USEC + w.microsecond
    if f in base:
        n = base[f]
        return Decimal(n) if numeric else float(n)
    if f in ("hour", "minute"):
        n = w.hour if f == "hour" else w.minute
        return Decimal(n) if numeric else float(n)
    if f == "second":
        return Decimal(sec_us).scaleb(-6) if numeric else sec_us / 1e6
    if f == "milliseconds":
        return Decimal(sec_us).scaleb(-3) if numeric else sec_us / 1e3
    if f == "microseconds":
        return Decimal(sec_us) if numeric else float(sec_us)
    if f == "epoch":
        instant = v if v.tzinfo is None else v.astimezone(dt.UTC).replace(tzinfo=None)
        us = _diff_micros(instant, _UNIX)
        return Decimal(us).scaleb(-6) if numeric else us / 1e6
    if f == "julian":
        day_us = ((w.hour * 60 + w.minute) * 60) * _USEC + sec_us
        if numeric:
            j = Decimal(w.date().toordinal() + _JULIAN_OFFSET)
            return pgtypes.unsigned_zero(
                pgtypes.CTX.add(j, pgtypes.numeric_div(Decimal(day_us), Decimal(_DAY_US)))
            )
        return (w.date().toordinal() + _JULIAN_OFFSET) + day_us / float(_DAY_US)
    if typ == TSTZ and f in ("timezone", "timezone_hour", "timezone_minute"):
        off = v.utcoffset()
        assert off is not None
        secs = int(off.total_seconds())
        n = (
            secs
            if f == "timezone"
            else int(secs / 3600)
            if f == "timezone_hour"
            else int((secs - int(secs / 3600) * 3600) / 60)
        )
        return Decimal(n) if numeric else float(n)
    raise EvalError("0A000", f'unit "{field}" not supported for type {_TYPE_WORDS[typ]}')


def _interval_part(field: object, v: Interval, numeric: bool) -> object:
    f = _unit(field, INTERVAL)
    years = int(v.months / 12)
    ints = {
        "millennium": int(years / 1000), "century": int(years / 100), "decade": int(years / 10),
        "year": years, "quarter": int((v.months - years * 12) / 3) + 1 if v.months >= 0 else
        -(int((-(v.months - years * 12)) / 3) + 1), "month": v.months - years * 12,
        "day": v.days, "hour": int(v.micros / (3600 * _USEC)),
        "minute": int((v.micros - int(v.micros / (3600 * _USEC)) * 3600 * _USEC) / (60 * _USEC)),
    }  # fmt: skip
    sec_us = v.micros - int(v.micros / (60 * _USEC)) * 60 * _USEC
    if f in ints:
        return Decimal(ints[f]) if numeric else float(ints[f])
    if f == "second":
        return Decimal(sec_us).scaleb(-6) if numeric else sec_us / 1e6
    if f == "milliseconds":
        return Decimal(sec_us).scaleb(-3) if numeric else sec_us / 1e3
    if f == "microseconds":
        return Decimal(sec_us) if numeric else float(sec_us)
    if f == "epoch":
        # 365.25 days a year, 30 days a month (interval_part_common)
        secs_us = (
            (years * 36525 * 864 * _USEC)  # 365.25 * 86400 s
            + (v.months - years * 12) * 30 * _DAY_US
            + v.days * _DAY_US
            + v.micros
        )
        return Decimal(secs_us).scaleb(-6) if numeric else secs_us / 1e6
    raise EvalError("0A000", f'unit "{field}" not supported for type interval')


# --- to_char ----------------------------------------------------------------------------------

_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip
_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII")

#: to_char's template patterns (formatting.c DCH_keywords), longest first.
_PATTERNS = sorted(
    [
        "A.D.",
        "A.M.",
        "AD",
        "AM",
        "B.C.",
        "BC",
        "CC",
        "DAY",
        "DDD",
        "DD",
        "DY",
        "Day",
        "Dy",
        "D",
        "FF1",
        "FF2",
        "FF3",
        "FF4",
        "FF5",
        "FF6",
        "FX",
        "HH24",
        "HH12",
        "HH",
        "IDDD",
        "ID",
        "IW",
        "IYYY",
        "IYY",
        "IY",
        "I",
        "J",
        "MI",
        "MM",
        "MONTH",
        "MON",
        "MS",
        "Month",
        "Mon",
        "OF",
        "P.M.",
        "PM",
        "Q",
        "RM",
        "SSSSS",
        "SSSS",
        "SS",
        "TZH",
        "TZM",
        "TZ",
        "US",
        "WW",
        "W",
        "Y,YYY",
        "YYYY",
        "YYY",
        "YY",
        "Y",
        "a.d.",
        "a.m.",
        "ad",
        "am",
        "b.c.",
        "bc",
        "cc",
        "day",
        "ddd",
        "dd",
        "dy",
        "d",
        "ff1",
        "ff2",
        "ff3",
        "ff4",
        "ff5",
        "ff6",
        "fx",
        "hh24",
        "hh12",
        "hh",
        "iddd",
        "id",
        "iw",
        "iyyy",
        "iyy",
        "iy",
        "i",
        "j",
        "mi",
        "mm",
        "month",
        "mon",
        "ms",
        "of",
        "p.m.",
        "pm",
        "q",
        "rm",
        "sssss",
        "ssss",
        "ss",
        "tz",
        "us",
        "ww",
        "w",
        "y,yyy",
        "yyyy",
        "yyy",
        "yy",
        "y",
    ],
    key=len,
    reverse=True,
)
_BY_FIRST: dict[str, tuple[str, ...]] = {
    c: tuple(p for p in _PATTERNS if p[0] == c) for c in {p[0] for p in _PATTERNS}
}


def _pattern_at(fmt: str, i: int) -> str | None:
    """The longest template pattern at ``fmt[i:]``, if any."""
    return next((p for p in _BY_FIRST.get(fmt[i], ()) if fmt.startswith(p, i)), None)


def _ordinal(n: int, upper: bool) -> str:
    s = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return s.upper() if upper else s


def _case(word: str, pattern: str) -> str:
    """A name in the case of its pattern: DAY -> MONDAY, Day -> Monday, day -> monday."""
    if pattern.isupper():
        return word.upper()
    if pattern.islower():
        return word.lower()
    return word


def to_char(v: object, fmt: object, session: str = "UTC") -> object:
    """``to_char(timestamp or timestamptz, template)`` with PostgreSQL's template patterns
    (formatting.c), the FM (no padding), TM (names; English) and FX prefixes and the TH/th
    suffixes, quoted text and backslash escapes. A date is a timestamptz at local midnight
    in the session's zone, as PostgreSQL casts it."""
    if isinstance(v, Interval) or not isinstance(v, dt.date):
        raise Unsupported(
            "to_char of a value that is not a date or timestamp is not evaluated by the proxy"
        )
    assert isinstance(fmt, str)
    if not isinstance(v, dt.datetime):
        v = localize(_midnight(v), session)
    w = _wall(v)
    aware = v.tzinfo is not None
    out: list[str] = []
    i = 0
    while i < len(fmt):
        fm = False
        while True:
            if fmt.startswith(("FM", "fm"), i):
                fm, i = True, i + 2
            elif fmt.startswith(("TM", "tm"), i) or fmt.startswith(("FX", "fx"), i):
                i += 2
            else:
                break
        if i >= len(fmt):
            break
        pat = _pattern_at(fmt, i)
        if pat is None:
            c = fmt[i]
            if c == '"':
                j = i + 1
                while j < len(fmt) and fmt[j] != '"':
                    if fmt[j] == "\\" and j + 1 < len(fmt):
                        j += 1
                    out.append(fmt[j])
                    j += 1
                i = j + 1
                continue
            if c == "\\" and i + 1 < len(fmt) and fmt[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            out.append(c)
            i += 1
            continue
        i += len(pat)
        th = None
        if fmt.startswith(("TH", "th"), i):
            th = fmt[i : i + 2]
            i += 2
        value, number = _pattern(pat, w, v, aware, fm)
        out.append(value)
        if th is not None and number is not None:
            out.append(_ordinal(number, th == "TH"))
    return "".join(out)


def _pattern(
    pat: str, w: dt.datetime, v: dt.datetime, aware: bool, fm: bool
) -> tuple[str, int | None]:
    """One pattern's text, and its number (for a TH suffix)."""
    up = pat.upper()

    def num(n: int, width: int) -> tuple[str, int]:
        if fm:
            return str(n), n
        return (f"{n:0{width}d}" if n >= 0 else "-" + f"{-n:0{width}d}"), n

    def name(word: str, width: int) -> tuple[str, None]:
        s = _case(word, pat if pat not in ("Day", "Dy", "Month", "Mon") else "Xx")
        return (s if fm else s.ljust(width)), None

    y = w.year
    if up in ("YYYY",):
        return num(y, 4)
    if up == "Y,YYY":
        return f"{y // 1000},{y % 1000:03d}", y
    if up == "YYY":
        return num(y % 1000, 3)
    if up == "YY":
        return num(y % 100, 2)
    if up == "Y":
        return num(y % 10, 1)
    iy = _isoyear(w.date())
    if up == "IYYY":
        return num(iy, 4)
    if up == "IYY":
        return num(iy % 1000, 3)
    if up == "IY":
        return num(iy % 100, 2)
    if up == "I":
        return num(iy % 10, 1)
    if up == "MM":
        return num(w.month, 2)
    if pat in ("MONTH", "Month", "month"):
        return name(_MONTHS[w.month - 1], 9)
    if pat in ("MON", "Mon", "mon"):
        return name(_MONTHS[w.month - 1][:3], 3)
    if pat in ("DAY", "Day", "day"):
        return name(_DAYS[w.weekday()], 9)
    if pat in ("DY", "Dy", "dy"):
        return name(_DAYS[w.weekday()][:3], 3)
    if up == "DDD":
        return num(w.timetuple().tm_yday, 3)
    if up == "IDDD":
        iso = w.isocalendar()
        return num((iso[1] - 1) * 7 + iso[2], 3)
    if up == "DD":
        return num(w.day, 2)
    if up == "D":
        return num(w.isoweekday() % 7 + 1, 1)
    if up == "ID":
        return num(w.isoweekday(), 1)
    if up == "IW":
        return num(w.isocalendar()[1], 2)
    if up == "WW":
        return num((w.timetuple().tm_yday - 1) // 7 + 1, 2)
    if up == "W":
        return num((w.day - 1) // 7 + 1, 1)
    if up == "Q":
        return num((w.month - 1) // 3 + 1, 1)
    if up == "CC":
        return num((y + 99) // 100, 2)
    if up == "J":
        return num(w.date().toordinal() + _JULIAN_OFFSET, 1)
    if pat in ("RM", "rm"):
        r = _ROMAN[w.month - 1]
        r = r if pat == "RM" else r.lower()
        return (r if fm else r.ljust(4)), None
    if up == "HH24":
        return num(w.hour, 2)
    if up in ("HH", "HH12"):
        return num(w.hour % 12 or 12, 2)
    if up == "MI":
        return num(w.minute, 2)
    if up == "SS":
        return num(w.second, 2)
    if up in ("SSSS", "SSSSS"):
        return num((w.hour * 60 + w.minute) * 60 + w.second, 1)
    if up == "MS":
        return num(w.microsecond // 1000, 3)
    if up == "US":
        return num(w.microsecond, 6)
    if up.startswith("FF"):
        k = int(up[2])
        return num(w.microsecond // 10 ** (6 - k), k)
    if up in ("AM", "PM", "A.M.", "P.M."):
        pm = w.hour >= 12
        word = ("P" if pm else "A") + ("M" if "." not in up else ".M.")
        return (word if pat[0].isupper() else word.lower()), None
    if up in ("AD", "BC", "A.D.", "B.C."):
        word = "AD" if "." not in up else "A.D."
        return (word if pat[0].isupper() else word.lower()), None
    if up in ("TZ", "OF", "TZH", "TZM"):
        if not aware:
            return "", None
        off = v.utcoffset()
        assert off is not None
        secs = int(off.total_seconds())
        if up == "TZ":
            abbr = v.tzname() or _offset_text(off)
            return (abbr if pat == "TZ" else abbr.lower()), None
        if up == "OF":
            return _offset_text(off), None
        sign = "-" if secs < 0 else "+"
        if up == "TZH":
            return f"{sign}{abs(secs) // 3600:02d}", None
        return f"{abs(secs) % 3600 // 60:02d}", None
    raise Unsupported(f"the to_char pattern {pat} is not evaluated by the proxy")


# --- to_timestamp, to_date, make_* ------------------------------------------------------------

_FIELD_PATTERNS = {
    "YYYY": ("year", 4), "MM": ("month", 2), "DD": ("day", 2), "HH24": ("hour", 2),
    "HH12": ("hour12", 2), "HH": ("hour12", 2), "MI": ("minute", 2), "SS": ("second", 2),
    "MS": ("ms", 3), "US": ("us", 6), "FF1": ("ff1", 1), "FF2": ("ff2", 2), "FF3": ("ff3", 3),
    "FF4": ("ff4", 4), "FF5": ("ff5", 5), "FF6": ("ff6", 6), "DDD": ("doy", 3),
    "TZH": ("tzh", 2), "TZM": ("tzm", 2),
}  # fmt: skip


def _parse_template(value: str, fmt: str, what: str) -> dict[str, int]:
    """Fields of ``value`` read by ``fmt`` for to_timestamp/to_date: numeric patterns, AM/PM
    and separators (a separator in the template matches any one non-alphanumeric character
    of the input, or none). Patterns beyond these are refused rather than guessed."""
    fields: dict[str, int] = {}
    i = j = 0
    v = value
    while i < len(fmt):
        if fmt.startswith(("FM", "fm"), i):
            i += 2
            continue
        pat = _pattern_at(fmt, i)
        if pat is None:
            c = fmt[i]
            if c == '"':
                end = fmt.find('"', i + 1)
                lit = fmt[i + 1 : end if end >= 0 else len(fmt)]
                j += len(lit)
                i = (end + 1) if end >= 0 else len(fmt)
                continue
            if c.isalnum():
                raise Unsupported(
                    f"{what} with the template character {c!r} is not evaluated by the proxy"
                )
            while j < len(v) and v[j] == " " and c != " ":
                j += 1
            if j < len(v) and not v[j].isalnum():
                j += 1
            i += 1
            continue
        i += len(pat)
        up = pat.upper()
        if up in ("AM", "PM", "A.M.", "P.M."):
            word = v[j : j + len(up)].upper()
            if word not in ("AM", "PM", "A.M.", "P.M."):
                raise EvalError("22007", f'invalid value "{v[j : j + len(up)]}" for "{pat}"')
            fields["pm"] = 1 if word.startswith("P") else 0
            j += len(up)
            continue
        if up == "TZH":  # a sign, or a minus the separator before took, then the hours
            if j < len(v) and v[j] in "+- ":
                fields["tzsign"] = -1 if v[j] == "-" else 1
                j += 1
            elif j > 0 and v[j - 1] == "-":
                raise Unsupported(f"{what} with a '-' both separator and sign of TZH")
            else:
                fields["tzsign"] = 1
        spec = _FIELD_PATTERNS.get(up)
        if spec is None:
            raise Unsupported(
                f"{what} with the template pattern {pat} is not evaluated by the proxy"
            )
        while j < len(v) and v[j] == " ":
            j += 1
        k = j
        width = spec[1]
        nxt = fmt[i : i + 1]
        limit = width if (nxt and not nxt.isspace() and not (up == "YYYY" and not nxt)) else 9
        if up == "YYYY" and (not nxt or not nxt.isalnum()):
            limit = 9  # YYYY takes more than 4 digits when a separator follows
        while k < len(v) and v[k].isdigit() and k - j < limit:
            k += 1
        if k == j:
            raise EvalError("22007", f'invalid value "{v[j : j + width]}" for "{pat}"')
        digits = v[j:k]
        n = int(digits)
        if spec[0].startswith("ff") or spec[0] in ("ms", "us"):
            n = int(digits.ljust(6 if spec[0] != "ms" else 3, "0")[: 6 if spec[0] != "ms" else 3])
        fields[spec[0]] = n
        j = k
    if v[j:].strip():
        raise EvalError("22007", "trailing characters remain in input string after datetime format")
    return fields


def _from_fields(f: dict[str, int], what: str) -> dt.datetime:
    y = f.get("year", 1)
    month, day = f.get("month", 1), f.get("day", 1)
    if "doy" in f:
        base = _checked(lambda: dt.datetime(y, 1, 1) + dt.timedelta(days=f["doy"] - 1))
        month, day = base.month, base.day
    hour = f.get("hour", 0)
    if "hour12" in f:
        h12 = f["hour12"]
        if not 1 <= h12 <= 12:
            raise EvalError("22008", f'hour "{h12}" is invalid for the 12-hour clock')
        hour = h12 % 12 + (12 if f.get("pm") else 0)
    elif f.get("pm") and hour < 12:
        hour += 12
    us = f.get("us", 0) or f.get("ms", 0) * 1000
    for k in range(1, 7):
        if f"ff{k}" in f:
            us = f[f"ff{k}"]
    if not 1 <= month <= 12 or not 1 <= y <= 9999 or not 1 <= day <= _days_in(y, month):
        raise EvalError("22008", f"date/time field value out of range in {what}")
    if hour > 23 or f.get("minute", 0) > 59 or f.get("second", 0) > 59:
        raise EvalError("22008", f"date/time field value out of range in {what}")
    return dt.datetime(y, month, day, hour, f.get("minute", 0), f.get("second", 0), us)


def to_timestamp(x: object, fmt_or_zone: object, session: object = None) -> object:
    """``to_timestamp(epoch seconds)`` or ``to_timestamp(text, template)``: a timestamptz
    shown in the session's zone (the text read as local time there)."""
    if session is None:  # to_timestamp(double precision), session zone appended
        assert isinstance(fmt_or_zone, str)
        secs = float(x)  # type: ignore[arg-type]
        if math.isnan(secs) or math.isinf(secs):
            raise Unsupported("to_timestamp of NaN or infinity is not evaluated by the proxy")
        us = round(secs * _USEC)
        return show(
            _checked(lambda: (_UNIX + dt.timedelta(microseconds=us)).replace(tzinfo=dt.UTC)),
            fmt_or_zone,
        )
    assert isinstance(x, str) and isinstance(fmt_or_zone, str) and isinstance(session, str)
    fields = _parse_template(x, fmt_or_zone, "to_timestamp")
    wall = _from_fields(fields, "to_timestamp")
    if "tzsign" not in fields and "tzm" not in fields:
        return localize(wall, session)
    # TZH/TZM: the text's own offset (east of Greenwich), as do_to_timestamp
    hours, mins = fields.get("tzh", 0), fields.get("tzm", 0)
    if hours > 15 or mins >= 60:
        raise EvalError("22009", f"time zone displacement out of range: {x!r}")
    east = fields.get("tzsign", 1) * (hours * 60 + mins) * 60
    return show(
        _checked(lambda: (wall - dt.timedelta(seconds=east)).replace(tzinfo=dt.UTC)), session
    )


def to_date(x: object, fmt: object) -> object:
    """``to_date(text, template)``."""
    assert isinstance(x, str) and isinstance(fmt, str)
    return _from_fields(_parse_template(x, fmt, "to_date"), "to_date").date()


def make_date(y: object, m: object, d: object) -> object:
    assert isinstance(y, int) and isinstance(m, int) and isinstance(d, int)
    if y <= 0 or y > 9999:
        if y == 0:
            raise EvalError("22008", f"date field value out of range: {y}-{m:02d}-{d:02d}")
        raise Unsupported("make_date outside the years 1 to 9999 is not evaluated by the proxy")
    if not 1 <= m <= 12 or not 1 <= d <= _days_in(y, m):
        raise EvalError("22008", f"date field value out of range: {y}-{m:02d}-{d:02d}")
    return dt.date(y, m, d)


def _make_ts(y: object, mo: object, d: object, h: object, mi: object, s: object) -> dt.datetime:
    day = make_date(y, mo, d)
    assert isinstance(day, dt.date) and isinstance(h, int) and isinstance(mi, int)
    sec = float(s)  # type: ignore[arg-type]
    if not (0 <= h <= 24 and 0 <= mi <= 59 and 0 <= sec <= 60):
        raise EvalError("22008", f"date field value out of range: {h}:{mi}:{sec}")
    us = round(sec * _USEC)
    return _checked(lambda: _midnight(day) + dt.timedelta(hours=h, minutes=mi, microseconds=us))


def make_timestamp(y: object, mo: object, d: object, h: object, mi: object, s: object) -> object:
    return _make_ts(y, mo, d, h, mi, s)


def make_timestamptz(*args: object) -> object:
    """``make_timestamptz(y, mo, d, h, mi, s [, zone])``, the session's zone appended."""
    session = args[-1]
    assert isinstance(session, str)
    in_zone = explicit_zone(args[6], iso=True) if len(args) == 8 else session
    return show(localize(_make_ts(*args[:6]), in_zone), session)


#: make_interval's named arguments, in PostgreSQL's order.
MAKE_INTERVAL_ARGS = ("years", "months", "weeks", "days", "hours", "mins", "secs")


def make_interval(years: object, months: object, weeks: object, days: object,
                  hours: object, mins: object, secs: object) -> object:  # fmt: skip
    ints = (years, months, weeks, days, hours, mins)
    if not all(isinstance(v, int) for v in ints):
        raise EvalError("22023", "make_interval takes integer arguments (secs: a number)")
    y, mo, w, d, h, mi = (int(v) for v in ints)  # type: ignore[call-overload]
    us = round(float(secs) * _USEC)  # type: ignore[arg-type]
    return Interval(months=y * 12 + mo, days=w * 7 + d, micros=(h * 3600 + mi * 60) * _USEC + us)


def justify_hours(v: object) -> object:
    """``justify_hours(interval)``: whole days of the time carried into days (interval_justify_hours)."""
    assert isinstance(v, Interval)
    whole = int(v.micros / _DAY_US)
    days, micros = v.days + whole, v.micros - whole * _DAY_US
    if days > 0 and micros < 0:
        micros, days = micros + _DAY_US, days - 1
    elif days < 0 and micros > 0:
        micros, days = micros - _DAY_US, days + 1
    return Interval(months=v.months, days=days, micros=micros)


def justify_days(v: object) -> object:
    """``justify_days(interval)``: whole 30-day months of the days carried into months, the
    signs of months and days made to agree (interval_justify_days)."""
    assert isinstance(v, Interval)
    whole = int(v.days / 30)
    months, days = v.months + whole, v.days - whole * 30
    if months > 0 and days < 0:
        days, months = days + 30, months - 1
    elif months < 0 and days > 0:
        days, months = days - 30, months + 1
    return Interval(months=months, days=days, micros=v.micros)


def justify_interval(v: object) -> object:
    """``justify_interval(interval)``: both, the signs of all three parts made to agree
    (interval_justify_interval)."""
    assert isinstance(v, Interval)
    whole_day = int(v.micros / _DAY_US)
    micros, days = v.micros - whole_day * _DAY_US, v.days + whole_day
    whole_month = int(days / 30)
    days, months = days - whole_month * 30, v.months + whole_month
    if months > 0 and (days < 0 or (days == 0 and micros < 0)):
        days, months = days + 30, months - 1
    elif months < 0 and (days > 0 or (days == 0 and micros > 0)):
        days, months = days - 30, months + 1
    if days > 0 and micros < 0:
        micros, days = micros + _DAY_US, days - 1
    elif days < 0 and micros > 0:
        micros, days = micros - _DAY_US, days + 1
    return Interval(months=months, days=days, micros=micros)


def age(a: object, b: object, session: str) -> object:
    """``age(a, b)``: the symbolic difference of two dates or timestamps in years, months and
    days (timestamp_age / timestamptz_age): field by field on the local calendar, negative
    fields borrowed from the next larger one, a month borrowed as the length of the earlier
    value's month. PostgreSQL resolves ``age(timestamp, timestamp)`` when a ``timestamp`` is
    given and no ``timestamp with time zone`` (a date read as midnight), else
    ``age(timestamptz, timestamptz)`` (dates and timestamps read in the session's zone)."""
    values = (a, b)
    naive = any(isinstance(v, dt.datetime) and v.tzinfo is None for v in values) and not any(
        isinstance(v, dt.datetime) and v.tzinfo is not None for v in values
    )
    typ = TS if naive else TSTZ
    x, y = (cast(v, "", typ, (), session) for v in values)
    assert isinstance(x, dt.datetime) and isinstance(y, dt.datetime)
    flip = x < y
    if typ == TSTZ:
        x, y = _wall(show(x, session)), _wall(show(y, session))
    f = [x.microsecond - y.microsecond, x.second - y.second, x.minute - y.minute,
         x.hour - y.hour, x.day - y.day, x.month - y.month, x.year - y.year]  # fmt: skip
    if flip:
        f = [-v for v in f]
    for i, size in enumerate((_USEC, 60, 60, 24)):
        while f[i] < 0:
            f[i] += size
            f[i + 1] -= 1
    first = x if flip else y  # the month borrowed is the earlier value's
    while f[4] < 0:
        f[4] += _days_in(first.year, first.month)
        f[5] -= 1
    while f[5] < 0:
        f[5] += 12
        f[6] -= 1
    if flip:
        f = [-v for v in f]
    us, sec, mi, h, d, mo, yr = f
    return Interval(months=yr * 12 + mo, days=d, micros=((h * 60 + mi) * 60 + sec) * _USEC + us)


def overlaps(s1: object, e1: object, s2: object, e2: object, session: str) -> object:
    """``(s1, e1) OVERLAPS (s2, e2)`` (overlaps_timestamp; an end may be an interval, the
    end then ``start + interval``): each period's ends ordered, NULL ends as PostgreSQL
    treats them. The values are compared as ``timestamp`` when one is a timestamp and none
    a timestamp with time zone (dates as midnight), else as ``timestamp with time zone``."""
    values = [s1, e1, s2, e2]
    naive = any(isinstance(v, dt.datetime) and v.tzinfo is None for v in values) and not any(
        isinstance(v, dt.datetime) and v.tzinfo is not None for v in values
    )
    typ = TS if naive else TSTZ
    pts: list[dt.datetime | None] = []
    for k, v in enumerate(values):
        if isinstance(v, Interval):
            start = pts[k - 1]
            v = None if start is None else plus_interval(start, v)
        elif v is not None:
            v = cast(v, "", typ, (), session)
        assert v is None or isinstance(v, dt.datetime)
        pts.append(v)
    ts1, te1, ts2, te2 = pts
    if ts1 is None:
        if te1 is None:
            return None
        ts1, te1 = te1, None
    elif te1 is not None and ts1 > te1:
        ts1, te1 = te1, ts1
    if ts2 is None:
        if te2 is None:
            return None
        ts2, te2 = te2, None
    elif te2 is not None and ts2 > te2:
        ts2, te2 = te2, ts2
    if ts1 > ts2:
        if te2 is None:
            return None
        if ts1 < te2:
            return True
        return None if te1 is None else False
    if ts1 < ts2:
        if te1 is None:
            return None
        if ts2 < te1:
            return True
        return None if te2 is None else False
    return None if te1 is None or te2 is None else True


def timezone(z: object, v: object, session: str) -> object:
    """``v AT TIME ZONE z``: a timestamp read as local time in ``z`` (a timestamptz, shown in
    the session's zone); a timestamptz as local time in ``z`` (a timestamp). A date is a
    timestamptz at local midnight in the session's zone, as PostgreSQL casts it."""
    name = explicit_zone(z)
    assert isinstance(v, dt.date)
    if not isinstance(v, dt.datetime):
        v = localize(_midnight(v), session)
    if v.tzinfo is None:
        return show(localize(v, name), session)
    return _wall(show(v, name))


# --- the functions PostgreSQL resolves -------------------------------------------------------


def _t_trunc(args: Sequence[str]) -> str:
    t = args[1]
    if t == "unknown":
        raise TypeMismatch("function date_trunc(unknown, unknown) is not unique", sqlstate="42725")
    if t == INTERVAL:
        raise TypeMismatch(
            "date_trunc of an interval is not evaluated by the proxy", sqlstate="0A000"
        )
    if t not in DATETIMES:
        raise TypeMismatch(f"function date_trunc(text, {pgtypes.sql_type(t)}) does not exist")
    if len(args) > 3:  # an explicit zone: date_trunc(text, timestamptz, text)
        return TSTZ
    return TS if t == TS else TSTZ


def _t_extract(args: Sequence[str]) -> str:
    if args[1] not in TYPES:
        raise TypeMismatch(f"function extract(unknown, {pgtypes.sql_type(args[1])}) does not exist")
    return "numeric"


def _t_date_part(args: Sequence[str]) -> str:
    if args[1] not in TYPES:
        raise TypeMismatch(
            f"function date_part(unknown, {pgtypes.sql_type(args[1])}) does not exist"
        )
    return "float8"


def _t_to_char(args: Sequence[str]) -> str:
    if args[0] in pgtypes.NUMBERS:
        raise TypeMismatch("to_char of a number is not evaluated by the proxy (cast it: x::text)",
                           sqlstate="0A000")  # fmt: skip
    if args[0] not in DATETIMES or not pgtypes.is_text(args[1]):
        raise TypeMismatch(
            f"function to_char({pgtypes.sql_type(args[0])}, {pgtypes.sql_type(args[1])}) does not exist"
        )
    return "text"


def _t_to_timestamp(args: Sequence[str]) -> str:
    if len(args) == 2 and (args[0] in pgtypes.NUMBERS or args[0] == "unknown"):
        return TSTZ
    if len(args) == 3 and all(pgtypes.is_text(a) for a in args[:2]):
        return TSTZ
    raise TypeMismatch("function to_timestamp needs a number, or a text and a template")


def _t_ints(name: str, n: int, result: str) -> Callable[[Sequence[str]], str]:
    def t(args: Sequence[str]) -> str:
        if len(args) != n or not all(a in pgtypes.INTS or a == "unknown" for a in args[:n]):
            raise TypeMismatch(f"function {name} takes {n} integers")
        return result

    return t


def _t_make_ts(zoned: bool) -> Callable[[Sequence[str]], str]:
    def t(args: Sequence[str]) -> str:
        n = len(args) - (1 if zoned else 0)
        if n not in ((6, 7) if zoned else (6,)) or not all(
            a in pgtypes.NUMBERS or a == "unknown" for a in args[:6]
        ):
            raise TypeMismatch("function make_timestamp takes year, month, day, hour, min, sec")
        return TSTZ if zoned else TS

    return t


def _t_timezone(args: Sequence[str]) -> str:
    if args[1] == TS:
        return TSTZ
    if args[1] in (TSTZ, DATE):
        return TS
    raise TypeMismatch(f"function timezone(text, {pgtypes.sql_type(args[1])}) does not exist")


def _t_date_bin(args: Sequence[str]) -> str:
    if (
        args[0] not in (INTERVAL, "unknown")
        or args[1] not in (TS, TSTZ)
        or args[2] not in (TS, TSTZ, "unknown")
    ):
        raise TypeMismatch("function date_bin takes an interval and two timestamps")
    return args[1]


def _t_date(args: Sequence[str]) -> str:
    if not castable(args[0], DATE):
        raise TypeMismatch(
            f"cannot cast type {pgtypes.sql_type(args[0])} to date", sqlstate="42846"
        )
    return DATE


def _t_age(args: Sequence[str]) -> str:
    written = args[:-1]  # the session's zone appended
    if len(written) == 1:
        raise TypeMismatch(
            "age() of one argument (the age at today's date) reads the clock, which the proxy "
            "does not evaluate: write both dates, age(DATE '2010-10-31', x)",
            sqlstate="0A000",
        )
    if len(written) != 2 or not all(a in DATETIMES or a == "unknown" for a in written):
        raise TypeMismatch(
            f"function age({', '.join(pgtypes.sql_type(a) for a in written)}) does not exist"
        )
    return INTERVAL


def _t_overlaps(args: Sequence[str]) -> str:
    written = args[:-1]  # the session's zone appended
    ok = len(written) == 4 and all(
        (a in DATETIMES or a == "unknown") if k % 2 == 0 else (a in TYPES or a == "unknown")
        for k, a in enumerate(written)
    )
    if not ok:
        raise TypeMismatch(
            f"function overlaps({', '.join(pgtypes.sql_type(a) for a in written)}) does not exist"
        )
    return "bool"


def _t_interval(name: str) -> Callable[[Sequence[str]], str]:
    def t(args: Sequence[str]) -> str:
        if len(args) != 1 or args[0] not in (INTERVAL, "unknown"):
            raise TypeMismatch(
                f"function {name}({', '.join(pgtypes.sql_type(a) for a in args)}) does not exist"
            )
        return INTERVAL

    return t


#: Functions whose last argument is the session's TimeZone, appended by the rewriter (never
#: written by the analyst): they make a timestamptz from something else, or read a date as
#: one (PostgreSQL's implicit cast of a date to timestamptz).
ZONED = frozenset(
    {
        "date_trunc",
        "to_char",
        "to_timestamp",
        "make_timestamptz",
        "timezone",
        "pg_time_tstz",
        "age",
        "overlaps",
    }
)
#: Functions of this module only the rewriter writes (never resolved from a statement).
INTERNAL = frozenset({"pg_time_tstz"})


def _tstz(v: object, session: str) -> object:
    return cast(v, "", TSTZ, (), session)


#: name -> (result type from the argument types, implementation, strict), as
#: :data:`rewriter.pgtypes.FUNCTIONS` (registered there).
FUNCTIONS: dict[str, tuple[Callable[[Sequence[str]], str], Callable[..., object], bool]] = {
    "date_trunc": (_t_trunc, date_trunc, True),
    "extract": (_t_extract, lambda f, v: extract(f, v, numeric=True), True),
    "date_part": (_t_date_part, lambda f, v: extract(f, v, numeric=False), True),
    "to_char": (_t_to_char, to_char, True),
    "to_timestamp": (_t_to_timestamp, to_timestamp, True),
    "to_date": (lambda a: DATE, to_date, True),
    "make_date": (_t_ints("make_date", 3, DATE), make_date, True),
    "make_timestamp": (_t_make_ts(False), make_timestamp, True),
    "make_timestamptz": (_t_make_ts(True), make_timestamptz, True),
    "make_interval": (lambda a: INTERVAL, make_interval, True),
    "timezone": (_t_timezone, timezone, True),
    "date_bin": (_t_date_bin, date_bin, True),
    "date": (_t_date, lambda v: cast(v, "", DATE), True),
    "isfinite": (lambda a: "bool", lambda v: True, True),
    "pg_time_tstz": (lambda a: TSTZ, _tstz, True),
    "age": (_t_age, age, True),
    "overlaps": (_t_overlaps, overlaps, False),
    "justify_days": (_t_interval("justify_days"), justify_days, True),
    "justify_hours": (_t_interval("justify_hours"), justify_hours, True),
    "justify_interval": (_t_interval("justify_interval"), justify_interval, True),
}


_A = TypeVar("_A")


def zone_args(name: str, args: list[_A], session: _A) -> list[_A]:
    """The arguments of a call of ``name`` as the rewriter evaluates it: the session's zone
    appended for :data:`ZONED` functions (``args`` are IR nodes; ``session`` the node of the
    zone's name)."""
    return [*args, session] if name in ZONED else args


def check_constants(name: str, values: Sequence[object], types: Sequence[str]) -> None:
    """Refuse, when the statement is read, what PostgreSQL refuses whatever the rows: a unit
    of ``date_trunc``/``extract``/``date_part`` it does not know or does not take for the
    argument's type, a zone the proxy does not evaluate (``values``: the constant arguments,
    :data:`NOT_CONSTANT` for the others). :class:`TypeMismatch` with PostgreSQL's SQLSTATE."""
    try:
        field = values[0] if values else NOT_CONSTANT
        if name in ("date_trunc", "extract", "date_part") and isinstance(field, str):
            typ = types[1]
            if name == "date_part" and typ == DATE:
                typ = TS  # date_part(text, date) reads the date as a timestamp
            if name == "date_trunc" and typ == DATE:
                typ = TSTZ
            if typ in TYPES:
                unit = _unit(field, typ)
                if name == "date_trunc":
                    _trunc_check(unit, typ)
                elif unit not in _PARTS[typ]:
                    raise EvalError(
                        "0A000", f'unit "{field}" not supported for type {_TYPE_WORDS[typ]}'
                    )
        zone_arg = {"timezone": 0, "date_trunc": 2, "make_timestamptz": 6}.get(name)
        # the zone the analyst wrote (the session's, appended last, is checked when read)
        if zone_arg is not None and zone_arg < len(values) - 1:
            z = values[zone_arg]
            if z is not NOT_CONSTANT:
                explicit_zone(z, iso=name == "make_timestamptz")
    except EvalError as e:
        raise TypeMismatch(e.message, sqlstate=e.sqlstate) from None


#: Marks an argument that is not a constant (:func:`check_constants`).
NOT_CONSTANT = object()

_DATE_PARTS = frozenset({"day", "month", "year", "quarter", "week", "decade", "century",
                         "millennium", "isoyear", "dow", "isodow", "doy", "epoch", "julian"})  # fmt: skip
_TS_PARTS = _DATE_PARTS | {"hour", "minute", "second", "milliseconds", "microseconds"}
_PARTS = {
    DATE: _DATE_PARTS,
    TS: _TS_PARTS,
    TSTZ: _TS_PARTS | {"timezone", "timezone_hour", "timezone_minute"},
    INTERVAL: frozenset({"millennium", "century", "decade", "year", "quarter", "month", "day",
                         "hour", "minute", "second", "milliseconds", "microseconds", "epoch"}),
}  # fmt: skip


def written_args(name: str, args: Sequence[str]) -> list[str]:
    """The arguments of a call as the analyst wrote them (templates read back as the same
    statement): without the appended zone."""
    return list(args[:-1]) if name in ZONED else list(args)


def interval_literal(text_: str | None, unit: str) -> Interval:
    """The value of ``INTERVAL 'text' [unit]`` as written (see :mod:`rewriter.dialect`)."""
    if text_ is None:
        raise TypeMismatch(
            "an interval literal must be a string: INTERVAL '1 day'", sqlstate="42601"
        )
    return parse_interval(text_, unit)


def literal_sql(v: object) -> str | None:
    """A date/time value as a SQL literal that reads back as the same value."""
    if isinstance(v, Interval):
        return f"INTERVAL '{interval_text(v)}'"
    if isinstance(v, dt.datetime):
        return f"{'TIMESTAMPTZ' if v.tzinfo is not None else 'TIMESTAMP'} '{text(v)}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return None
