"""A condition true for every declared value of a column asks nothing more: the statement is
the statement without it, and a repeat of it (issue 41, item 6). The form of a plan follows
its weights, not its text (rewriter.canonical): attributes along which every query's weights
are constant are summed out, so the batches are the same linear queries over the same
marginal, with the same key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
import scipy.sparse as sp
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch

import rewriter
from dp.domain import Domain, QueryBatch
from proxy.config import Config, parse_config
from rewriter.canonical import project

SCHEMA = rewriter.load_schema(
    Path(__file__).resolve().parents[1] / "sql_fixtures" / "adult" / "lapras.toml"
)
RACES = "'White', 'Asian-Pac-Islander', 'Amer-Indian-Eskimo', 'Other', 'Black'"
#: (statement, the same question without its always-true condition)
SAME = [
    ("SELECT count(*) FROM adult WHERE sex IN ('Male', 'Female')", "SELECT count(*) FROM adult"),
    (f"SELECT count(*) FROM adult WHERE race IN ({RACES})", "SELECT count(*) FROM adult"),
    ("SELECT count(*) FROM adult WHERE race IS NOT NULL", "SELECT count(*) FROM adult"),
    ("SELECT count(*) FROM adult WHERE age BETWEEN 17 AND 90", "SELECT count(*) FROM adult"),
    (
        "SELECT sex, count(*) FROM adult WHERE income IN ('<=50K', '>50K') GROUP BY sex",
        "SELECT sex, count(*) FROM adult GROUP BY sex",
    ),
    (
        "SELECT avg(age) FROM adult WHERE hours_per_week >= 1 AND sex <> 'x'",
        "SELECT avg(age) FROM adult",
    ),
]
#: conditions that are *not* true everywhere: other questions
OTHER = [
    ("SELECT count(*) FROM adult WHERE age > 17", "SELECT count(*) FROM adult"),
    ("SELECT count(*) FROM adult WHERE sex IN ('Male')", "SELECT count(*) FROM adult"),
    (
        "SELECT sex, count(*) FROM adult WHERE race IN ('White', 'Black') GROUP BY sex",
        "SELECT sex, count(*) FROM adult GROUP BY sex",
    ),
]


def _plan(sql: str) -> rewriter.Plan:
    [st] = rewriter.classify(sql, SCHEMA)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    return st.plan


@pytest.mark.parametrize(("sql", "without"), SAME)
def test_an_always_true_condition_gives_the_same_batch(sql: str, without: str) -> None:
    a, b = _plan(sql), _plan(without)
    assert a.batch.key == b.batch.key and a.view == b.view


@pytest.mark.parametrize(("sql", "without"), OTHER)
def test_other_conditions_stay_other_questions(sql: str, without: str) -> None:
    assert _plan(sql).batch.key != _plan(without).batch.key


def test_the_projection_keeps_every_query_and_sums_out_only_constant_attributes() -> None:
    d = Domain.of(("a", 3), ("b", 2), ("c", 2))
    rng = np.random.default_rng(7)
    ab = rng.integers(-2, 3, size=(4, 3, 2)).astype(float)  # 4 queries over (a, b)
    dense = np.repeat(ab[..., None], 2, axis=3).reshape(4, -1)  # constant along c
    batch = QueryBatch(d, sp.csr_array(dense))
    p = project(batch)
    assert p.domain.names == ("a", "b")  # only c is summed out
    x = rng.integers(0, 50, size=d.size).astype(float)
    marginal = x.reshape(3, 2, 2).sum(axis=2).reshape(-1)
    assert np.array_equal(batch.answer(x), p.answer(marginal))  # the same linear queries
    # a query that reads c in one place keeps c
    dense[0, 1] += 1.0
    assert project(QueryBatch(d, sp.csr_array(dense))).domain.names == ("a", "b", "c")


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg), "test.toml")
    start_epoch(cfg, DASHBOARD)
    return cfg


def test_the_second_is_answered_as_a_repeat_at_no_cost(config: Config) -> None:
    with Proxy(config, seed=61) as proxy, client(proxy) as (conn, notices):
        for sql, without in SAME:
            first = conn.execute(without).fetchall()
            again = conn.execute(sql).fetchall()
            assert again == first, sql
            assert "repeat" in notices[-1] and "no budget spent" in notices[-1], sql
        # and the other way round: the statement with the condition first
        first = conn.execute("SELECT sum(hours_per_week) FROM adult WHERE age <= 90").fetchall()
        assert "repeat" not in notices[-1]
        assert conn.execute("SELECT sum(hours_per_week) FROM adult").fetchall() == first
        assert "repeat" in notices[-1] and "no budget spent" in notices[-1]


async def test_a_prepared_statement_binds_to_the_same_question(config: Config) -> None:
    with Proxy(config, seed=62) as proxy:
        conn = await asyncpg.connect(proxy.dsn)
        notices: list[str] = []
        conn.add_log_listener(lambda _c, m: notices.append(m.message))
        try:
            total = await conn.fetchval("SELECT count(*) FROM adult")
            stmt = await conn.prepare(
                "SELECT count(*) FROM adult WHERE age BETWEEN $1 AND $2 AND sex <> $3"
            )
            assert await stmt.fetchval(17, 90, "none") == total
            assert "repeat" in notices[-1]
            other = await stmt.fetchval(18, 90, "none")  # not every age: another question
            assert "repeat" not in notices[-1] and other <= total + 100
        finally:
            await conn.close()
