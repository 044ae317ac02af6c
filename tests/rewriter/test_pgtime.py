"""Date and time semantics (rewriter.pgtime), diffed against PostgreSQL in several time zones.

A small protected table holds every day of a span crossing the daylight-saving changes of
the zones below, the end of a year (ISO week 53 of 2009) and NULL, times every hour, once
each; so each expression over it takes every value the rewriter evaluates over the domain.
For each expression, as a **group key** (``SELECT <expr>, count(*) ... GROUP BY 1``) and as a
**condition** (``SELECT count(*) ... WHERE <cond>``), PostgreSQL's answer must equal the
rewriter's on the exact histogram: value for value, type for type, and for a ``timestamp
with time zone`` the instant *and* the offset it is shown with, under the session's
``TimeZone`` (set on the connection, passed to ``rewriter.classify``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pins import exact_answer, pin_table
from psycopg.types.string import TextLoader

import rewriter
from dp.pin import Pin
from proxy import provision
from rewriter import pgtime
from rewriter.schema import Schema

TOML = """
[tables.lapras_time]
schema = "public"
[tables.lapras_time.columns]
d = "date"
h = "integer"
[tables.lapras_time.attributes.d]
kind = "date"
min = "2009-09-26"
max = "2010-04-06"
nullable = true
[tables.lapras_time.attributes.h]
kind = "integer"
min = 0
max = 23
"""

DAYS = [dt.date(2009, 9, 26) + dt.timedelta(days=k) for k in range(193)]
ROWS = [(d, h) for d, h in itertools.product([*DAYS, None], range(24))]

#: Sessions' zones: UTC, daylight saving in the north (New York) and in the south at
#: midnight (Sao Paulo: a day without a midnight), half-hour offsets and half-hour daylight
#: saving (Lord Howe), and the POSIX form PostgreSQL reports for SET TimeZone = '+2'.
ZONES = ["UTC", "America/New_York", "America/Sao_Paulo", "Australia/Lord_Howe", "<+02>-02"]

TS = "(d + h * INTERVAL '1 hour')"
TS2 = "(d + h * INTERVAL '97 minutes' + INTERVAL '1.5 seconds')"
TSTZ = "(d::timestamptz + h * INTERVAL '1 hour')"
UNITS = ["microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month",
         "quarter", "year", "decade", "century", "millennium"]  # fmt: skip
FIELDS = ["year", "quarter", "month", "week", "dow", "isodow", "doy", "day", "epoch", "decade",
          "century", "millennium", "isoyear", "julian", "hour", "minute", "second",
          "milliseconds", "microseconds"]  # fmt: skip
PATTERNS = [
    "YYYY-MM", "YYYY-MM-DD", "Dy", "Day", "FMDay", "DAY", "day", "Mon YYYY", "Month", "FMMonth",
    "MON", "IYYY-IW", "IW", "ID", "D", "DDD", "IDDD", "WW", "W", "Q", "CC", "J", "YY", "Y,YYY",
    "DDth", "FMDDth", "\"week\" IW", "RM", "rm", "HH24:MI:SS", "HH12 AM", "hh:mi pm", "SSSS",
    "YYYY\"Q\"Q", "FMMM/FMDD/YYYY", "MS US FF3",
]  # fmt: skip

KEYS = [
    # date arithmetic and intervals
    "d + 1", "d - 7", "d - DATE '2009-12-25'", "d + INTERVAL '1 day'", "d - INTERVAL '1 week'",
    "d + INTERVAL '1 month'", "d + INTERVAL '1 mon 2 days 03:04:05'", "d + INTERVAL '-1 day'",
    "d + INTERVAL '@ 1 day ago'", "d + INTERVAL '1.5 days'", "d + INTERVAL '3' DAY", TS, TS2,
    "d + make_interval(hours => h)", "d + make_interval(days => h, mins => 30)",
    f"extract(epoch FROM {TS} - d)", f"extract(epoch FROM {TS2} - DATE '2009-01-01')",
    "extract(day FROM (d + h * INTERVAL '5 hours') - d)", "extract(epoch FROM d - (d + INTERVAL '2 days'))",
    "d::timestamp", "CAST(d AS timestamp) + INTERVAL '-1 day'", "(d + h)::text", f"{TS}::text",
    f"{TS2}::date", "date(d + h * INTERVAL '3 hours')", "d + h * INTERVAL '1 hour' * 2",
    "d + INTERVAL '1 hour' / 2 * h",
    # Metabase's week starting on Sunday, Tableau's and Looker's shapes
    "CAST(date_trunc('week', CAST((d + INTERVAL '1 day') AS timestamp)) AS timestamp) + INTERVAL '-1 day'",
    "CAST(date_trunc('MONTH', CAST(d AS timestamp)) AS DATE)",
    # Grafana's $__timeGroup and epochs
    "floor(extract(epoch FROM d) / 604800) * 604800",
    f"floor(extract(epoch FROM {TS}) / 3600) * 3600", "extract(epoch FROM d)::bigint",
    "CAST(EXTRACT(YEAR FROM d) AS BIGINT)", "CAST(EXTRACT(dow FROM d) AS integer) + 1",
    "make_date(CAST(extract(year FROM d) AS int), 1, 1)", "make_timestamp(2010, 1, h + 1, h, 30, 1.5)",
    "date_bin(INTERVAL '15 minutes', " + TS2 + ", TIMESTAMP '2001-01-01')",
    "CASE WHEN h < 12 THEN d ELSE d + INTERVAL '12 hours' END", "coalesce(d, DATE '2000-01-01')",
    "greatest(d, DATE '2010-01-01')", "d > '2010-03-01T00:00:00Z'",
    "to_char(d, 'YYYY-MM-DD') = '2009-12-31'", "to_date(to_char(d, 'YYYY-MM-DD'), 'YYYY-MM-DD')",
    # age(), justify_*, interval input with a spaced sign, zones as offsets and intervals
    "age(d, DATE '2009-12-31')::text", "age(DATE '2010-01-31', d)::text",
    f"age({TS2}, TIMESTAMP '2010-01-30 13:45:10.5')::text", f"age(TIMESTAMP '2009-11-30 23:00', {TS})::text",
    "extract(month FROM age(DATE '2010-04-06', d))", f"age(d, {TS2})::text",
    "justify_days((d - DATE '2009-12-25') * INTERVAL '1 day')::text",
    "justify_hours(h * INTERVAL '7 hours' - INTERVAL '2 days')::text",
    "justify_interval(INTERVAL '1 mon' - h * INTERVAL '5 hours')::text",
    "justify_interval((d - DATE '2010-01-01') * INTERVAL '-1 day' + h * INTERVAL '3 hours')::text",
    "justify_days(INTERVAL '-1 mon' + (d - DATE '2010-01-01') * INTERVAL '1 day')::text",
    "d < 'infinity'", "CASE WHEN d = '-infinity' THEN 1 WHEN d > '-infinity' THEN 2 END",
    "(d + INTERVAL '1 month - 1 day')::date", "d + INTERVAL '1 day - 01:30'", "d + INTERVAL '- 2 days'",
    "d::timestamp AT TIME ZONE '+05:30'", f"{TS} AT TIME ZONE 'UTC+3'", f"{TS} AT TIME ZONE '-3'",
    "d::timestamp AT TIME ZONE INTERVAL '05:30'", f"{TS} AT TIME ZONE INTERVAL '-03:00'",
    f"{TS} AT TIME ZONE '<+03>-03'", f"{TS} AT TIME ZONE 'EST5EDT'",
    *(f"date_trunc('{u}', {TS2})" for u in UNITS),
    *(f"extract({f} FROM d)" for f in FIELDS if f not in ("hour", "minute", "second", "milliseconds", "microseconds")),
    *(f"extract({f} FROM {TS2})" for f in FIELDS),
    *(f"date_part('{f}', d)" for f in FIELDS),
    *(f"date_part('{f}', {TS2})" for f in FIELDS),
    *(f"to_char({TS2}, '{p}')" for p in PATTERNS),
    *(f"to_char(d, '{p}')" for p in PATTERNS[:12]),
]  # fmt: skip

#: Expressions whose values depend on the session's TimeZone.
ZONE_KEYS = [
    *(f"date_trunc('{u}', d)" for u in UNITS), "date_trunc('month', d)::date",
    "d::timestamptz", f"{TS}::timestamptz", TSTZ, f"date_trunc('hour', {TSTZ})",
    f"date_trunc('day', {TSTZ})", f"date_trunc('week', {TSTZ})", f"date_trunc('minute', {TSTZ} + INTERVAL '30 min')",
    "d::timestamptz + INTERVAL '1 day'", "(d::timestamptz + INTERVAL '1 month')::date",
    f"{TSTZ} + INTERVAL '1 day'", f"{TSTZ} - INTERVAL '1 mon'", f"{TSTZ}::date", f"{TSTZ}::timestamp",
    "extract(epoch FROM d::timestamptz)", f"extract(hour FROM {TSTZ})", f"extract(timezone FROM {TSTZ})",
    f"extract(timezone_hour FROM {TSTZ})", f"date_part('timezone_minute', {TSTZ})",
    "extract(epoch FROM date_trunc('month', d))", "extract(day FROM date_trunc('week', d))",
    "to_char(d, 'YYYY-MM-DD HH24:MI:SS TZ OF')", f"to_char({TSTZ}, 'HH24 TZ tz OF TZH:TZM')",
    "to_char(date_trunc('month', d), 'YYYY-MM')",
    f"to_timestamp(floor(extract(epoch FROM {TS}) / 3600) * 3600)",
    "to_timestamp(extract(epoch FROM d))::date", "to_timestamp(h * 86400.5)",
    "d AT TIME ZONE 'UTC'", f"{TS} AT TIME ZONE 'Europe/Paris'", f"{TSTZ} AT TIME ZONE 'America/Sao_Paulo'",
    "date_trunc('day', d::timestamptz, 'Asia/Tokyo')", f"date_trunc('hour', {TSTZ}, 'Australia/Lord_Howe')",
    "make_timestamptz(2009, 11, 1, h, 30, 0)", "make_timestamptz(2010, 3, 14, h, 30, 0, 'America/New_York')",
    f"{TSTZ} - TIMESTAMPTZ '2009-10-01 00:00:00+00' < INTERVAL '40 days'",
    f"extract(epoch FROM {TSTZ} - d::timestamptz)", f"extract(epoch FROM {TSTZ} - {TS})",
    "CASE WHEN h < 12 THEN d::timestamp ELSE d::timestamptz END",
    f"{TSTZ} > '2009-11-01 01:30'", "d < TIMESTAMPTZ '2009-11-01 12:00:00+05'",
    "to_timestamp(to_char(d, 'YYYY-MM-DD') || ' 13:30', 'YYYY-MM-DD HH24:MI')",
    "age(d, DATE '2009-11-01')::text", f"age({TSTZ}, TIMESTAMPTZ '2010-03-14 01:00:00+00')::text",
    f"age({TS}, d::timestamptz - INTERVAL '1 month')::text",
    f"{TSTZ} AT TIME ZONE '+05:30'", f"{TSTZ} AT TIME ZONE INTERVAL '-02:30'",
    f"date_trunc('day', {TSTZ}, '+05:30')", "make_timestamptz(2010, 3, 14, h, 30, 0, '+05:30')",
    "make_timestamptz(2010, 3, 14, h, 30, 0, '-0330')", "make_timestamptz(2010, 3, 14, h, 0, 0, 'UTC+3')",
    f"CAST({TSTZ} + INTERVAL '0.4 seconds' * h AS timestamptz(0))", "d::timestamptz(2)",
    "to_timestamp(to_char(d, 'YYYY-MM-DD') || ' 10:00 -03', 'YYYY-MM-DD HH24:MI TZH')",
    "to_timestamp(to_char(d, 'YYYY-MM-DD') || ' 10:00 +05:30', 'YYYY-MM-DD HH24:MI TZH:TZM')",
    "(d, d + 1) OVERLAPS (DATE '2010-01-01', NULL::date)",
    f"({TSTZ}, INTERVAL '6 hours') OVERLAPS ('2009-11-01 05:00:00+00', INTERVAL '1 hour')",
]  # fmt: skip

CONDITIONS = [
    "d BETWEEN '2010-03-01T00:00:00Z' AND '2010-03-31T23:59:59Z'", "d >= '20100301'",
    "d > TIMESTAMP '2010-03-01 10:00:00'", "d >= TO_DATE('2009-12-01', 'YYYY-MM-DD')",
    "d < TO_TIMESTAMP('2010-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')",
    f"{TS} >= TIMESTAMP '2009-12-31 22:00:00' AND {TS} < '2010-01-01 02:00'",
    "extract(dow FROM d) IN (0, 6)", "date_trunc('month', d) = '2010-02-01'",
    "d::timestamptz >= TIMESTAMPTZ '2009-11-01 04:00:00Z'", "d >= DATE '2010-03-01' - 30",
    "(d::timestamp, INTERVAL '1 day') OVERLAPS (TIMESTAMP '2010-01-01 12:00', TIMESTAMP '2010-01-05')",
    "(d, d + 2) OVERLAPS (DATE '2010-01-01', DATE '2009-12-25')",
    f"({TS}, NULL::timestamp) OVERLAPS (TIMESTAMP '2010-01-01', TIMESTAMP '2010-01-02')",
    "d BETWEEN SYMMETRIC '2010-03-31' AND '2010-03-01'",
    "d < 'infinity' AND d > '-infinity'::date", "NOT (d >= 'infinity')",
    f"{TS} BETWEEN '-infinity' AND TIMESTAMP '2010-01-01 05:00'", f"{TSTZ} <> TIMESTAMPTZ 'infinity'",
    "'-infinity' < d::timestamp AND d <= DATE '2010-01-01'",
]  # fmt: skip


@pytest.fixture(scope="module")
def schema(pg: Any) -> Schema:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lapras_time")
        conn.execute("CREATE TABLE public.lapras_time (d date, h integer)")
        with conn.cursor().copy("COPY public.lapras_time FROM STDIN") as copy:
            for row in ROWS:
                copy.write_row(row)
        conn.execute(f"GRANT SELECT ON public.lapras_time TO {provision.AGGREGATOR}")
    return rewriter.parse_schema(TOML, "test-time.toml")


@pytest.fixture(scope="module")
def pin(pg: Any, schema: Schema) -> Pin:
    return pin_table(pg.aggregator_dsn, schema, "lapras_time")


def _norm(v: object) -> object:
    """A value as PostgreSQL shows it: timestamps as their text (PostgreSQL's read as text,
    which shows a timestamptz in the session's zone with its offset)."""
    if isinstance(v, dt.datetime):
        return ("timestamp", pgtime.text(v))
    if isinstance(v, str) and re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", v):
        return ("timestamp", v)
    if isinstance(v, float):
        return ("float", v + 0.0)
    return (type(v).__name__, v)


def _ours(sql: str, schema: Schema, pin: Pin, zone: str) -> tuple[list[tuple[Any, ...]], list[int]]:
    [st] = rewriter.classify(sql, schema, time_zone=zone)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, (sql, st)
    return exact_answer(st.plan, pin), [c.type_oid for c in st.plan.columns]


def _theirs(pg: Any, sql: str, zone: str) -> tuple[list[tuple[Any, ...]], list[int]]:
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        for name in ("timestamp", "timestamptz"):  # their text, as PostgreSQL shows them
            conn.adapters.register_loader(name, TextLoader)
        conn.execute("SELECT set_config('TimeZone', %s, false)", [zone])
        cur = conn.execute(sql)
        assert cur.description is not None
        return cur.fetchall(), [d.type_code for d in cur.description]


def _check_key(expr: str, schema: Schema, pin: Pin, pg: Any, zone: str) -> None:
    sql = f"SELECT {expr} AS k, count(*) FROM lapras_time GROUP BY 1"
    ours, our_types = _ours(sql, schema, pin, zone)
    theirs, types = _theirs(pg, sql, zone)
    assert our_types == types, (our_types, types)
    mine = sorted(repr(tuple(map(_norm, r))) for r in ours if r[-1] != 0)
    pgs = sorted(repr(tuple(map(_norm, r))) for r in theirs)
    assert mine == pgs, [
        *[x for x in mine if x not in pgs][:5],
        "!=",
        *[x for x in pgs if x not in mine][:5],
    ]


@pytest.mark.parametrize("expr", KEYS)
def test_time_expression_as_a_group_key(expr: str, pg: Any, schema: Schema, pin: Pin) -> None:
    _check_key(expr, schema, pin, pg, "UTC")


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("expr", ZONE_KEYS)
def test_zoned_expression_as_a_group_key(
    expr: str, zone: str, pg: Any, schema: Schema, pin: Pin
) -> None:
    _check_key(expr, schema, pin, pg, zone)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
@pytest.mark.parametrize("cond", CONDITIONS)
def test_time_condition(cond: str, zone: str, pg: Any, schema: Schema, pin: Pin) -> None:
    sql = f"SELECT count(*), sum(h) FROM lapras_time WHERE {cond}"
    ours, _ = _ours(sql, schema, pin, zone)
    assert ours == _theirs(pg, sql, zone)[0]


def test_extract_returns_numeric_with_postgresql_scales(schema: Schema, pin: Pin, pg: Any) -> None:
    """numeric results keep PostgreSQL's scale in their text (1262304000.000000)."""
    sql = f"SELECT extract(epoch FROM {TS2}) AS e, extract(second FROM {TS2}) AS s, count(*) FROM lapras_time WHERE d = '2010-01-01' GROUP BY 1, 2"
    ours, _ = _ours(sql, schema, pin, "UTC")
    theirs, _ = _theirs(pg, sql, "UTC")
    assert sorted(tuple(str(v) for v in r) for r in ours if r[-1]) == sorted(
        tuple(str(v) for v in r) for r in theirs
    )
    assert all(isinstance(r[0], Decimal) for r in ours)
