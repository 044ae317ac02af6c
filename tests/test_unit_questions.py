"""Questions about units on the user-level check-ins, through the wire (psycopg against the
whole proxy), on the embedded PostgreSQL: ``privacy_unit = "user_id"``, ``max_rows_per_unit =
50`` (sql_fixtures/gowalla).

Noise off (every draw zero), each answer is PostgreSQL's own answer to the same question with
the per-unit values clamped to their public range as docs/sql.md says (``least(count(*),
50)``; the statements whose buckets do not see the clamp are compared with PostgreSQL as
written). Noise on, each is one release at the sensitivity of one unit: 1 for the number of
units and for a histogram over units, sqrt(24) for the units of each of 24 hours; a repeat is
answered from the stored release; an epoch loaded again from the ledger (a new proxy) answers
from its stored rows per unit.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, client, reset_ledger, start_epoch
from unit_helpers import GOWALLA, protect
from unit_helpers import config as make_config

from proxy.ledger import decode

#: (statement through the proxy, the same question on PostgreSQL)
EXACT = [
    ("SELECT count(DISTINCT user_id) FROM checkins", None),
    ("SELECT count(DISTINCT user_id) AS users FROM checkins WHERE lat >= 40", None),
    ("SELECT hour, count(DISTINCT user_id) FROM checkins WHERE hour < 12 GROUP BY hour", None),
    (
        "SELECT date_trunc('month', checkin_date)::date AS m, count(DISTINCT user_id) AS u"
        " FROM checkins GROUP BY 1 ORDER BY u DESC, m LIMIT 5",
        None,
    ),
    ("SELECT count(*) FROM (SELECT DISTINCT user_id FROM checkins WHERE hour = 3) t", None),
    (  # a condition true for every per-unit value: the same question as count(DISTINCT ...)
        "SELECT count(*) FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t"
        " WHERE n >= 1",
        None,
    ),
    (
        "SELECT width_bucket(n, 0, 50, 5) AS bucket, count(*) AS users FROM (SELECT user_id,"
        " count(*) AS n FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1",
        None,
    ),
    (
        "SELECT activity, count(*) FROM (SELECT user_id, CASE WHEN count(*) < 20 THEN 'light'"
        " WHEN count(*) < 40 THEN 'regular' ELSE 'heavy' END AS activity FROM checkins"
        " GROUP BY user_id) t GROUP BY activity ORDER BY activity",
        None,
    ),
    (
        "SELECT avg(n) FROM (SELECT user_id, count(*) n FROM checkins GROUP BY user_id) t",
        "SELECT avg(n) FROM (SELECT user_id, least(count(*), 50) n FROM checkins"
        " GROUP BY user_id) t",
    ),
    (
        "WITH per_user AS (SELECT user_id, count(*) AS n FROM checkins WHERE lat < 40"
        " GROUP BY user_id) SELECT count(*) FILTER (WHERE n >= 30) AS active, count(*) AS users"
        " FROM per_user",
        None,
    ),
    (
        "SELECT count(*) FROM (SELECT user_id FROM checkins GROUP BY user_id"
        " HAVING count(*) >= 45) t",
        None,
    ),
    (
        "SELECT h, count(*) FROM (SELECT user_id, max(hour) AS h FROM checkins"
        " WHERE hour BETWEEN 6 AND 20 GROUP BY user_id) t GROUP BY h ORDER BY h",
        None,
    ),
    (
        "SELECT d, count(*) FROM (SELECT user_id, count(DISTINCT hour) AS d FROM checkins"
        " GROUP BY user_id) t GROUP BY d ORDER BY d",
        None,
    ),
    (
        "SELECT sum(s) AS total, max(s) AS most FROM (SELECT user_id, sum(hour) AS s"
        " FROM checkins WHERE hour >= 20 GROUP BY user_id) t",
        "SELECT sum(s) AS total, max(s) AS most FROM (SELECT user_id, least(sum(hour), 50 * 23)"
        " AS s FROM checkins WHERE hour >= 20 GROUP BY user_id) t",
    ),
    (
        "SELECT CASE WHEN evening * 2 > n THEN 'evening' ELSE 'day' END AS kind, count(*)"
        " FROM (SELECT user_id, count(*) FILTER (WHERE hour >= 18) AS evening, count(*) AS n"
        " FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1",
        "SELECT CASE WHEN evening * 2 > n THEN 'evening' ELSE 'day' END AS kind, count(*)"
        " FROM (SELECT user_id, least(count(*) FILTER (WHERE hour >= 18), 50) AS evening,"
        " least(count(*), 50) AS n FROM checkins GROUP BY user_id) t GROUP BY 1 ORDER BY 1",
    ),
]


@pytest.fixture(autouse=True)
def _protected(pg: Any) -> None:
    protect(pg)


def _number(v: Any) -> Any:
    return float(v) if isinstance(v, Decimal) else v


@pytest.fixture(scope="module")
def exact(pg: Any) -> list[list[tuple[Any, ...]]]:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        return [
            [tuple(_number(v) for v in row) for row in conn.execute(theirs or ours).fetchall()]
            for ours, theirs in EXACT
        ]


def test_noise_off_each_answer_is_postgresql_s_with_the_values_clamped(
    pg: Any, exact: list[list[tuple[Any, ...]]]
) -> None:
    reset_ledger(pg)
    # so large a budget that every stated standard error is negligible: the floors that keep
    # noise out of a min or max (three standard errors) act as noise off
    config = make_config(pg, re.sub(r"(?m)^lifetime_\w+ = .*$", "", GOWALLA))
    start_epoch(config, [], table="checkins", epsilon=1e4)
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, _):
        for (sql, _), want in zip(EXACT, exact, strict=True):
            got = [tuple(_number(v) for v in row) for row in conn.execute(sql).fetchall()]
            if len(got) > len(want):  # public groups no unit is in: PostgreSQL omits them
                got = [r for r in got if r[-1] != 0 or r in want]
            if "ORDER BY" not in sql:
                got, want = sorted(got, key=repr), sorted(want, key=repr)
            assert len(got) == len(want), sql
            for a, b in zip(got, want, strict=True):
                assert len(a) == len(b) and all(
                    x == pytest.approx(y, rel=1e-12) if isinstance(y, float) else x == y
                    for x, y in zip(a, b, strict=True)
                ), (sql, got, want)
    assert exact[0] == [(1000,)]  # every user has a check-in


def _charge(pg: Any) -> Any:
    with psycopg.connect(pg.state_dsn) as st:
        rows = st.execute(
            "SELECT payload::text FROM lapras.ledger WHERE kind = 'Charged' ORDER BY seq"
        ).fetchall()
    return decode(rows[-1][0])


def test_noise_is_scaled_to_one_unit_and_a_repeat_spends_nothing(pg: Any) -> None:
    reset_ledger(pg)
    config = make_config(pg)
    start_epoch(config, [], table="checkins")
    hist = (
        "SELECT n, count(*) FROM (SELECT user_id, count(*) AS n FROM checkins"
        " GROUP BY user_id) t GROUP BY n"
    )
    with Proxy(config, seed=5) as proxy, client(proxy) as (conn, notices):
        [(units,)] = conn.execute("SELECT count(DISTINCT user_id) FROM checkins").fetchall()
        assert _charge(pg).sensitivity == 1.0  # one unit: one more or one fewer
        assert abs(units - 1000) < 200
        rows = conn.execute(hist).fetchall()
        assert _charge(pg).sensitivity == 1.0  # each unit in one bucket
        assert [n for n, _ in rows] == list(range(1, 51))  # every public value of n
        conn.execute("SELECT hour, count(DISTINCT user_id) FROM checkins GROUP BY hour")
        assert _charge(pg).sensitivity == pytest.approx(math.sqrt(24))  # a unit in each hour
        seen = len(notices)
        assert conn.execute(hist).fetchall() == rows  # a repeat: the stored answer
        assert len(notices) == seen + 1 and "no budget spent" in notices[-1]
        with psycopg.connect(pg.state_dsn) as st:
            [(charges,)] = st.execute(
                "SELECT count(*) FROM lapras.ledger WHERE kind = 'Charged'"
            ).fetchall()
    # a new proxy loads the epoch and its rows per unit from the ledger
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, _):
        assert conn.execute(hist).fetchall() == rows  # stored, across processes
        [(north,)] = conn.execute(
            "SELECT count(DISTINCT user_id) FROM checkins WHERE lat >= 0"
        ).fetchall()
    with psycopg.connect(pg.admin_dsn) as conn:
        [(want,)] = conn.execute(
            "SELECT count(DISTINCT user_id) FROM checkins WHERE lat >= 0"
        ).fetchall()
    assert north == want
    with psycopg.connect(pg.state_dsn) as st:
        [(after,)] = st.execute(
            "SELECT count(*) FROM lapras.ledger WHERE kind = 'Charged'"
        ).fetchall()
    assert after == charges + 1  # the repeat spent nothing, the new question once


REFUSED = [
    ("SELECT user_id, count(*) FROM checkins GROUP BY 1", "42501", "one row per unit"),
    ("SELECT user_id FROM checkins", "42501", None),
    (
        "WITH t AS (SELECT count(*) AS n, count(DISTINCT user_id) AS u FROM checkins)"
        " SELECT n::numeric / u FROM t",
        "0A000",
        "in a statement of its own",
    ),
    (
        "SELECT n FROM (SELECT user_id, avg(hour) AS n FROM checkins GROUP BY user_id) t",
        "0A000",
        "per-unit value",
    ),
    (
        "SELECT count(*) FROM (SELECT user_id, count(*) n FROM checkins GROUP BY user_id"
        " LIMIT 10) t",
        "0A000",
        "LIMIT",
    ),
    ("SELECT max(user_id) FROM checkins", "0A000", "privacy unit of protected table checkins"),
    (
        "SELECT hour / 6, count(DISTINCT user_id) FILTER (WHERE lat >= 0) FROM checkins GROUP BY 1",
        "0A000",
        "count(DISTINCT user_id) FILTER (WHERE ...)",
    ),
]


@pytest.mark.parametrize(("sql", "sqlstate", "words"), REFUSED)
def test_what_is_refused_says_why(pg: Any, sql: str, sqlstate: str, words: str | None) -> None:
    config = make_config(pg)
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.Error) as info:
            conn.execute(sql).fetchall()
    assert info.value.sqlstate == sqlstate, info.value
    assert "no public domain" not in str(info.value)
    if words is not None:
        assert words in str(info.value), info.value


def test_an_epoch_without_rows_per_unit_refuses_them_before_any_charge(pg: Any) -> None:
    """``unit_questions = false``: the pin is one row per cell, questions about units are
    refused; an epoch pinned so (or by an older proxy) refuses them before deciding."""
    without = GOWALLA.replace(
        "max_rows_per_unit = 50", "max_rows_per_unit = 50\nunit_questions = false"
    )
    reset_ledger(pg)
    start_epoch(make_config(pg, without), [], table="checkins")
    sql = "SELECT count(DISTINCT user_id) FROM checkins"
    with Proxy(make_config(pg, without), sampler=ZeroSampler) as proxy, client(proxy) as (c, _):
        with pytest.raises(psycopg.Error) as info:
            c.execute(sql)
        assert info.value.sqlstate == "0A000" and "unit_questions = false" in str(info.value)
    with Proxy(make_config(pg), sampler=ZeroSampler) as proxy, client(proxy) as (c, _):
        before = _charges(pg)
        with pytest.raises(psycopg.Error) as info:
            c.execute(sql)
        assert info.value.sqlstate == "55000" and "no rows per unit" in str(info.value)
        assert _charges(pg) == before  # refused before anything was charged
        [(n,)] = c.execute("SELECT count(*) FROM checkins").fetchall()  # the pin still answers
    assert _charges(pg) == before + 1 and n > 0


def _charges(pg: Any) -> int:
    with psycopg.connect(pg.state_dsn) as st:
        [(charges,)] = st.execute(
            "SELECT count(*) FROM lapras.ledger WHERE kind = 'Charged'"
        ).fetchall()
    return int(charges)


MIXED = [
    "SELECT count(*)::numeric / count(DISTINCT user_id) AS per_user FROM checkins",
    "SELECT hour, count(*), count(DISTINCT user_id) AS users FROM checkins WHERE lat >= 0"
    " GROUP BY hour HAVING count(DISTINCT user_id) > 10 ORDER BY users DESC, hour LIMIT 5",
    "SELECT hour / 6 AS q, count(*) AS n, avg(hour), count(DISTINCT user_id) FROM checkins"
    " GROUP BY 1 ORDER BY 1",
]


def test_count_distinct_units_beside_other_aggregates_is_a_plan_of_two_releases(
    pg: Any,
) -> None:
    """Noise off, with a bound no user reaches (the bounded data is the table): PostgreSQL's
    answers, each statement two releases (the rows' aggregates, the units)."""
    unbounded = re.sub(
        r"(?m)^max_rows_per_unit = .*$",
        "max_rows_per_unit = 2000",
        re.sub(r"(?m)^lifetime_\w+ = .*$", "", GOWALLA),
    )
    reset_ledger(pg)
    config = make_config(pg, unbounded)
    start_epoch(config, [], table="checkins", epsilon=1e9)
    with psycopg.connect(pg.admin_dsn) as conn:
        want = [[tuple(_number(v) for v in r) for r in conn.execute(q).fetchall()] for q in MIXED]
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, notices):
        for sql, rows in zip(MIXED, want, strict=True):
            before = _charges(pg)
            got = [tuple(_number(v) for v in r) for r in conn.execute(sql).fetchall()]
            assert len(got) == len(rows), (sql, got, rows)
            for a, b in zip(got, rows, strict=True):
                assert all(
                    x == pytest.approx(y, rel=1e-9) if isinstance(y, float) else x == y
                    for x, y in zip(a, b, strict=True)
                ), (sql, got, rows)
            assert _charges(pg) == before + 2, sql
            assert "a plan of 2 releases" in notices[-1], notices[-1]
