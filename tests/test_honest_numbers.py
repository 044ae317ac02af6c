"""Each answer's own error through the wire (issue 39, item 4): ``lapras_interval_low/high``
with psycopg (simple, extended with parameters: the backend describes them through the
declarations ``lapras provision`` makes) and SQLAlchemy; the NOTICE's intervals of
statistics; a user-level answer's NOTICE on the unit bound."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from epoch_helpers import Proxy, client, config_text, reset_ledger, start_epoch
from unit_helpers import BOUND, protect
from unit_helpers import config as unit_config

from proxy.config import Config, parse_config

INTERVAL = (
    "SELECT sex, count(*), lapras_interval_low(count(*)), lapras_interval_high(count(*)) "
    "FROM adult GROUP BY sex ORDER BY sex"
)


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg, stream_length=200), "test.toml")
    start_epoch(cfg, [])
    return cfg


def _se(notice: str, label: str) -> float:
    m = re.search(rf"standard error .*\b{label} ([0-9.e+]*[0-9])(?: to ([0-9.e+]*[0-9]))?", notice)
    assert m is not None, notice
    return float(m.group(2) or m.group(1))


def test_interval_functions_are_post_processing_of_the_same_answer(config: Config) -> None:
    with Proxy(config, seed=3) as proxy, client(proxy) as (conn, notices):
        plain = conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex ORDER BY sex")
        counts = plain.fetchall()
        assert "fresh noise" in notices[-1]
        se = _se(notices[-1], "count")
        cur = conn.execute(INTERVAL)
        assert cur.description is not None
        assert [(d.name, d.type_code) for d in cur.description] == [
            ("sex", 25),
            ("count", 20),
            ("lapras_interval_low", 20),
            ("lapras_interval_high", 20),
        ]
        rows = cur.fetchall()
        assert "repeat" in notices[-1] and "no budget spent" in notices[-1]  # no new charge
        assert [(s, n) for s, n, _, _ in rows] == counts  # the same answer
        for _, n, low, high in rows:
            assert 0 <= low <= n <= high
            assert abs((high - low) - 2 * 2.118 * se) <= 2  # 95%: +- 2.118 standard errors


def test_parameters_are_described_by_the_backend(config: Config) -> None:
    """A statement with a parameter is described by the backend (psycopg binds on the
    server): the declarations ``lapras provision`` makes give its types."""
    sql = (
        "SELECT avg(age), lapras_interval_low(avg(age)), lapras_interval_high(avg(age)), "
        "max(hours_per_week), lapras_interval_high(max(hours_per_week)) "
        "FROM adult WHERE age > %s"
    )
    with Proxy(config, seed=4) as proxy, client(proxy) as (conn, notices):
        for prepare in (False, True):
            cur = conn.execute(sql, (40,), prepare=prepare)
            assert cur.description is not None
            assert [d.type_code for d in cur.description] == [1700, 1700, 1700, 23, 23]
            [(avg, low, high, top, top_high)] = cur.fetchall()
            assert 41 <= low <= avg <= high <= 90  # inside the range the WHERE allows
            assert top <= top_high <= 99
        assert re.search(r"95% interval max \d+ to \d+", notices[-1]), notices[-1]


def test_statistics_get_their_own_interval_in_the_notice(config: Config) -> None:
    sql = (
        "SELECT max(age), lapras_interval_low(max(age)), lapras_interval_high(max(age)), "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY age) AS median, "
        "lapras_interval_low(percentile_cont(0.5) WITHIN GROUP (ORDER BY age)), "
        "lapras_interval_high(percentile_cont(0.5) WITHIN GROUP (ORDER BY age)), "
        "count(DISTINCT native_country), lapras_interval_high(count(DISTINCT native_country)) "
        "FROM adult"
    )
    with Proxy(config, seed=5) as proxy, client(proxy) as (conn, notices):
        cur = conn.execute(sql)
        assert cur.description is not None
        assert [d.type_code for d in cur.description] == [23, 23, 23, 701, 701, 701, 20, 20]
        [(top, lo, hi, median, m_lo, m_hi, countries, c_hi)] = cur.fetchall()
        assert 17 <= lo <= top <= hi <= 90 and m_lo <= median <= m_hi
        assert countries <= c_hi == 42  # noise never rules out a country: all 42 declared
        notice = notices[-1]
        # the NOTICE states the same intervals, not the histogram's count error
        assert f"max {lo} to {hi}" in notice and f"median {m_lo:.4g} to {m_hi:.4g}" in notice
        assert "standard error" not in notice


def test_sqlalchemy_reads_the_interval_columns(config: Config) -> None:
    adult = sa.table("adult", sa.column("sex"), sa.column("age"))
    n = sa.func.count()
    query = (
        sa.select(
            adult.c.sex,
            n.label("n"),
            sa.func.lapras_interval_low(n).label("n_low"),
            sa.func.lapras_interval_high(n).label("n_high"),
        )
        .where(adult.c.age > 30)
        .group_by(adult.c.sex)
        .order_by(adult.c.sex)
    )
    with Proxy(config, seed=6) as proxy:
        engine = sa.create_engine(proxy.dsn.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as conn:
                rows = conn.execute(query).mappings().all()
        finally:
            engine.dispose()
    assert [r["sex"] for r in rows] == ["Female", "Male"]
    for r in rows:
        assert isinstance(r["n_low"], int) and r["n_low"] <= r["n"] <= r["n_high"]


def test_outside_a_dp_statement_the_functions_say_where_they_work(config: Config) -> None:
    with Proxy(config, seed=7) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute("SELECT lapras_interval_low(1)")  # relayed: the backend's declaration
        assert "LAPRAS proxy" in info.value.diag.message_primary
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute("SELECT lapras_interval_low(stddev(age)) FROM adult")
        assert "count, sum, avg" in (info.value.diag.message_hint or "")


def test_a_user_level_answer_says_what_the_bound_does(pg: Any) -> None:
    protect(pg)
    reset_ledger(pg)
    cfg = unit_config(pg)
    start_epoch(cfg, [], table="checkins")
    with Proxy(cfg, seed=8) as proxy, client(proxy) as (conn, notices):
        conn.execute("SELECT count(*) FROM checkins").fetchall()
        assert f"each user_id counts with at most {BOUND} of its rows" in notices[-1]
        assert re.search(r"standard error count [0-9.e+]+\.$", notices[-1])
