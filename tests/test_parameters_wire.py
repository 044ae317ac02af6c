"""Statements with parameters through the wire, as asyncpg and psycopg (server-side prepared)
send them: the values arrive in binary or text, typed by the backend's Describe, and each
answer (noise off, the corpus's proxy: tests/test_corpus.py) is diffed against PostgreSQL's
for the same statement and values. Among them: a date column compared with timestamp and
timestamp-with-time-zone parameters (the date is its midnight, as PostgreSQL compares it), and a
question about units with a parameter in its per-unit part (planned when executed, values bound).
"""

import datetime as dt
import re
from typing import Any

import asyncpg
import psycopg
import pytest
from test_corpus import corpus_proxy, diff  # noqa: F401

CASES = [
    ("SELECT count(*) FROM adult WHERE age > $1", [40]),
    (
        "SELECT sex, count(*) FROM adult WHERE age BETWEEN $1 AND $2 GROUP BY sex ORDER BY sex",
        [20, 30],
    ),
    ("SELECT count(*) FROM adult WHERE education IN ($1, $2)", ["Bachelors", "Masters"]),
    (
        "SELECT count(*) FROM checkins WHERE checkin_date >= $1 AND checkin_date < $2",
        [dt.date(2010, 1, 1), dt.date(2010, 2, 1)],
    ),
    (
        "SELECT date_trunc('month', checkin_date) AS m, count(*) FROM checkins WHERE checkin_date >= $1 GROUP BY 1 ORDER BY 1",
        [dt.date(2010, 6, 1)],
    ),
    (
        "SELECT count(*) FROM checkins WHERE checkin_date >= $1::timestamptz",
        [dt.datetime(2010, 6, 1, tzinfo=dt.UTC)],
    ),
    (
        "SELECT count(*) FROM checkins WHERE checkin_date >= $1::timestamp",
        [dt.datetime(2010, 6, 1)],
    ),
    (
        "SELECT count(*) FROM checkins WHERE checkin_date > $1::timestamp",
        [dt.datetime(2010, 6, 1, 12, 30)],
    ),
    ("SELECT count(*) FROM checkins WHERE checkin_date = $1::timestamp", [dt.datetime(2010, 6, 1)]),
    (
        "SELECT count(*) FROM checkins WHERE checkin_date <= $1::timestamptz",
        [dt.datetime(2010, 6, 1, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5)))],
    ),
    ("SELECT sex, count(*) FROM adult GROUP BY sex ORDER BY sex LIMIT $1", [1]),
    ("SELECT avg(hours_per_week) FROM adult WHERE sex = $1 AND income = $2", ["Female", ">50K"]),
    ("SELECT count(*) FROM adult WHERE age > $1::int + 10", [30]),
    ("SELECT hour, count(*) FROM checkins WHERE hour >= $1 GROUP BY hour ORDER BY hour", [20]),
    ("SELECT count(*) FILTER (WHERE age > $1) FROM adult", [50]),
    (
        "SELECT r.region, count(*) FROM adult a JOIN public.country_region r ON r.country = a.native_country WHERE r.region = $1 GROUP BY 1",
        ["Europe"],
    ),
    (
        "SELECT count(DISTINCT user_id) FROM checkins WHERE checkin_date >= $1",
        [dt.date(2010, 9, 1)],
    ),
    ("SELECT count(*) FROM adult WHERE capital_gain >= $1", [1000]),
    ("SELECT sum(capital_gain) FROM adult WHERE age < $1", [30]),
    ("SELECT count(*) FROM adult WHERE age = ANY($1)", [[30, 40, 50]]),
    (
        "SELECT sex, count(*) FROM adult WHERE education = ANY($1) GROUP BY sex ORDER BY sex",
        [["Bachelors", "Masters", None]],
    ),
    ("SELECT count(*) FROM adult WHERE age <> ALL($1::int[])", [[30, 40]]),
    ("SELECT count(*) FROM adult WHERE age = ANY($1)", [[]]),
    (
        "SELECT count(*) FROM checkins WHERE checkin_date = ANY($1)",
        [[dt.date(2010, 1, 1), dt.date(2010, 7, 4)]],
    ),
    (
        "SELECT hour, count(*) FROM checkins WHERE hour = ANY($1) AND checkin_date >= $2 GROUP BY 1 ORDER BY 1",
        [[1, 2, 3], dt.date(2010, 3, 1)],
    ),
]


@pytest.mark.parametrize("sql,args", CASES, ids=[str(i) for i in range(len(CASES))])
async def test_asyncpg_binds_as_postgresql_does(
    corpus_proxy: Any,  # noqa: F811  (the fixture imported above)
    pg: Any,
    sql: str,
    args: list[Any],
) -> None:
    theirs_c = await asyncpg.connect(pg.admin_dsn)
    ours_c = await asyncpg.connect(corpus_proxy.dsn)
    try:
        theirs = [tuple(r) for r in await theirs_c.fetch(sql, *args)]
        ours = [tuple(r) for r in await ours_c.fetch(sql, *args)]
    finally:
        await theirs_c.close()
        await ours_c.close()
    assert diff(ours, theirs) is None, (ours, theirs)


@pytest.mark.parametrize("sql,args", CASES, ids=[str(i) for i in range(len(CASES))])
def test_psycopg_prepared_binds_as_postgresql_does(
    corpus_proxy: Any,  # noqa: F811  (the fixture imported above)
    pg: Any,
    sql: str,
    args: list[Any],
) -> None:
    q = re.sub(r"\$(\d+)", "%s", sql)
    with psycopg.connect(pg.admin_dsn) as c:
        theirs = c.execute(q, args, prepare=True).fetchall()
    with psycopg.connect(corpus_proxy.dsn) as c:
        ours = c.execute(q, args, prepare=True).fetchall()
    assert diff(ours, theirs) is None, (ours, theirs)
