"""What analysts and their tools ask, through the real proxy with real noise (issue 14).

The exactness of every shape is diffed against PostgreSQL without noise in
``tests/rewriter/test_golden.py``; here the same shapes go through the wire, answered by the
engine with noise, and are checked against the exact answers within their stated standard
errors, with PostgreSQL's result types.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, client, config_text, reset_ledger, start_epoch

from proxy.config import Config, parse_config


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg, stream_length=200), "test.toml")
    start_epoch(cfg, [])
    return cfg


def _errors(notice: str) -> dict[str, float]:
    """The standard error of each aggregate the NOTICE names (the largest, for a range)."""
    part = notice.split("standard error ", 1)[1].rstrip(".")
    out: dict[str, float] = {}
    for item in part.split(", "):
        m = re.fullmatch(r"(.+?) ([0-9.e+-]+)(?: to ([0-9.e+-]+))?", item)
        assert m is not None, notice
        out[m.group(1)] = float(m.group(3) or m.group(2))
    return out


def _exact(pg: Any, sql: str) -> tuple[list[tuple[Any, ...]], list[int]]:
    with psycopg.connect(pg.aggregator_dsn) as direct:
        cur = direct.execute(sql)
        assert cur.description is not None
        return cur.fetchall(), [d.type_code for d in cur.description]


def test_count_and_average_in_one_statement_are_calibrated_per_aggregate(
    config: Config, pg: Any
) -> None:
    """The issue's example: all rows shared one noise scale sized for the SUM row, so counts
    had a standard error of 8,747 and an average was 60.8 under ``age < 60``."""
    sql = "SELECT sex, count(*), avg(age) FROM adult WHERE age < 60 GROUP BY sex ORDER BY sex"
    exact, types = _exact(pg, sql)
    with Proxy(config, seed=5) as proxy, client(proxy) as (conn, notices):
        cur = conn.execute(sql)
        rows = cur.fetchall()
        assert cur.description is not None
        assert [d.type_code for d in cur.description] == types == [25, 20, 1700]
        errors = _errors(notices[-1])
        assert set(errors) == {"count", "avg"}
        assert errors["count"] < 500  # a count's own scale (was 8,747)
        for (sex, n, avg), (sex0, n0, avg0) in zip(rows, exact, strict=True):
            assert sex == sex0
            assert abs(n - n0) <= 5 * errors["count"]
            assert isinstance(avg, Decimal) and 17 <= avg <= 59  # never outside the filter
            assert abs(float(avg) - float(avg0)) <= 5 * errors["avg"] + 0.5
        # the same question with its aggregates in another order is a repeat: free
        again = conn.execute(
            "SELECT sex, avg(age), COUNT(*) FROM adult WHERE age < 60 GROUP BY 1 ORDER BY 1"
        ).fetchall()
        assert "repeat" in notices[-1]
        assert [(s, n, a) for s, a, n in again] == rows


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        ("SELECT CASE WHEN age >= 65 THEN 'senior' ELSE 'other' END AS band, count(*) FROM adult GROUP BY 1 ORDER BY 1", 1),
        ("SELECT floor(age / 10) * 10 AS decade, count(*) FROM adult GROUP BY 1 ORDER BY 1", 1),
        ("SELECT count(*) FILTER (WHERE income = '>50K') AS rich, count(*) FROM adult WHERE lower(sex) LIKE 'f%'", 0),
        ("SELECT sex, round(avg(age), 1) AS avg_age, avg(age)::numeric(10,2) FROM adult GROUP BY sex ORDER BY sex", 1),
        ("SELECT income, count(*) * 100.0 / sum(count(*)) OVER () AS pct FROM adult GROUP BY income ORDER BY income", 1),
        ("SELECT sex, count(*) FROM adult GROUP BY ROLLUP (sex) ORDER BY sex NULLS LAST", 1),
        ("SELECT * FROM (SELECT sex, count(*) AS n FROM adult GROUP BY 1) t ORDER BY n DESC LIMIT 1", 1),
        ("SELECT count(*) FROM (SELECT * FROM adult WHERE age BETWEEN 30 AND 39) t1", 0),
    ],
)  # fmt: skip
def test_shapes_tools_send_are_answered_near_the_exact_answer(
    config: Config, pg: Any, sql: str, keys: int
) -> None:
    exact, types = _exact(pg, sql)
    with Proxy(config, seed=7) as proxy, client(proxy) as (conn, notices):
        cur = conn.execute(sql)
        rows = cur.fetchall()
        assert cur.description is not None
        assert [d.type_code for d in cur.description] == types
        assert "fresh noise" in notices[-1]
        se = max(_errors(notices[-1]).values())
    assert len(rows) == len(exact)
    for got, want in zip(rows, exact, strict=True):
        assert got[:keys] == want[:keys]  # group keys: public, exact
        for a, b in zip(got[keys:], want[keys:], strict=True):
            # counts, sums, averages, shares: within five standard errors (shares in percent)
            assert abs(float(a) - float(b)) <= 5 * se + 0.05 * abs(float(b)) + 1, (got, want)


def test_public_values_cost_nothing(config: Config) -> None:
    with Proxy(config, seed=9) as proxy, client(proxy) as (conn, notices):
        details: list[str] = []
        conn.add_notice_handler(lambda d: details.append(d.message_detail or ""))
        conn.execute("SELECT count(*) FROM adult WHERE age > 40").fetchone()
        before = re.search(r"stream position (\d+)", details[-1])
        values = conn.execute("SELECT DISTINCT sex FROM adult ORDER BY 1 LIMIT 1000").fetchall()
        assert values == [("Female",), ("Male",)]
        assert "public values" in notices[-1] and "no budget spent" in notices[-1]
        groups = conn.execute("SELECT income FROM adult GROUP BY income").fetchall()
        assert sorted(groups) == [("<=50K",), (">50K",)]
        counted = conn.execute(
            "SELECT count(*) FROM (SELECT sex, income, count(*) FROM adult GROUP BY 1, 2) q"
        ).fetchone()
        assert counted == (4,)  # the public groups, whatever the noise
        assert "public values" in notices[-1]
        conn.execute("SELECT count(*) FROM adult WHERE age > 41").fetchone()
        after = re.search(r"stream position (\d+)", details[-1])
        assert before is not None and after is not None
        assert int(after.group(1)) == int(before.group(1)) + 1  # only the fresh answer


def test_refusals_name_the_construct_in_sql_words(config: Config) -> None:
    with Proxy(config, seed=11) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute("SELECT median(age) FROM adult")
        assert "percentile_cont(0.5) WITHIN GROUP" in (info.value.diag.message_hint or "")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT string_agg(sex, ',') FROM adult")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute("SELECT count(*) FROM adult WHERE sex < 'M'")
        assert "collation" in (info.value.diag.message_hint or "")
        with pytest.raises(psycopg.errors.DivisionByZero) as info:
            conn.execute("SELECT count(*) FROM adult WHERE 100 / (age - 30) > 1")
        assert "declared domain" in info.value.diag.message_primary
        assert conn.execute("SELECT 1").fetchone() == (1,)
