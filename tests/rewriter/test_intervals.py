"""``lapras_interval_low/high(<aggregate>)``: classification, types, templates, the same batch
as the aggregate alone (no extra charge), and the ends post-processing gives."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import rewriter
from dp import stats
from rewriter.plan import AggRef

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)


def _plan(sql: str) -> rewriter.Plan:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    return st.plan


AGGREGATES = {
    "count(*)": 20,
    "sum(age)": 20,
    "avg(hours_per_week)": 1700,
    "min(age)": 23,
    "max(education_num)": 23,
    "percentile_cont(0.5) WITHIN GROUP (ORDER BY age)": 701,
    "percentile_disc(0.25) WITHIN GROUP (ORDER BY native_country)": 25,
    "count(DISTINCT occupation)": 20,
}


@pytest.mark.parametrize("agg", AGGREGATES)
def test_an_interval_is_the_aggregate_s_type_over_the_same_batch(agg: str) -> None:
    alone = _plan(f"SELECT sex, {agg} FROM adult GROUP BY sex")
    both = _plan(
        f"SELECT sex, {agg}, lapras_interval_low({agg}), LAPRAS_INTERVAL_HIGH({agg}) AS hi "
        "FROM adult GROUP BY sex"
    )
    assert [(c.name, c.type_oid) for c in both.columns] == [
        ("sex", 25),
        (alone.columns[1].name, AGGREGATES[agg]),
        ("lapras_interval_low", AGGREGATES[agg]),
        ("hi", AGGREGATES[agg]),
    ]
    # the same linear queries: a repeat of the aggregate alone, never another charge
    assert both.batch.key == alone.batch.key
    ends = [e for e in both.post.outputs if isinstance(e, AggRef) and e.bound]
    assert [e.bound for e in ends] == ["low", "high"]
    # the template reads back as the same question
    [again] = rewriter.classify(both.fingerprint.template, ADULT)
    assert isinstance(again, rewriter.DPStatement) and again.plan is not None
    assert again.plan.post == both.post and again.plan.batch.key == both.batch.key
    assert "lapras_interval_low(" in both.fingerprint.template


def _exact(plan: rewriter.Plan) -> np.ndarray:
    """A histogram with rows in every cell, answered exactly."""
    x = np.arange(plan.batch.domain.size, dtype=np.float64) % 7 + 1
    return np.asarray(plan.batch.answer(x), dtype=np.float64)


@pytest.mark.parametrize("agg", AGGREGATES)
def test_exact_answers_have_a_point_interval(agg: str) -> None:
    plan = _plan(
        f"SELECT {agg}, lapras_interval_low({agg}), lapras_interval_high({agg}) FROM adult"
    )
    exact = _exact(plan)
    [(value, low, high)] = rewriter.postprocess(plan, exact)
    assert low == value == high
    [(v2, low2, high2)] = rewriter.postprocess(plan, exact, np.zeros_like(exact))
    assert (v2, low2, high2) == (value, low, high)


def test_noisy_ends_hold_the_answer() -> None:
    sql = (
        "SELECT sex, {0}, lapras_interval_low({0}), lapras_interval_high({0}) "
        "FROM adult WHERE age < 60 GROUP BY sex"
    )
    rng = np.random.default_rng(5)
    for agg in AGGREGATES:
        plan = _plan(sql.format(agg))
        exact = _exact(plan)
        for sigma in (0.5, 3.0, 40.0):
            noisy = exact + rng.normal(0, sigma, exact.shape)
            se = np.full(exact.shape, sigma)
            for _, value, low, high in rewriter.postprocess(plan, noisy, se):
                if value is None:
                    continue
                assert low <= value <= high, (agg, sigma, value, low, high)
                assert type(low) is type(value) is type(high)


def test_count_and_average_ends() -> None:
    plan = _plan(
        "SELECT count(*), lapras_interval_low(count(*)), lapras_interval_high(count(*)), "
        "avg(age), lapras_interval_low(avg(age)), lapras_interval_high(avg(age)) "
        "FROM adult WHERE age < 60"
    )
    assert plan.batch.num_queries == 2  # count and sum(age) (the count shared)
    # sum of ages 40,000 over 1,000 rows (scaled by the sum's scale, 59), errors 10 and 20
    lays = plan.layouts
    answers = np.zeros(plan.batch.num_queries)
    se = np.zeros(plan.batch.num_queries)
    count_layout = next(lay for lay in lays if lay.scale == 1.0)
    sum_layout = next(lay for lay in lays if lay.scale != 1.0)
    answers[count_layout.offset], se[count_layout.offset] = 1000.0, 10.0
    answers[sum_layout.offset] = 40_000.0 / sum_layout.scale
    se[sum_layout.offset] = 20.0 / sum_layout.scale
    [(n, n_lo, n_hi, avg, a_lo, a_hi)] = rewriter.postprocess(plan, answers, se)
    assert (n, n_lo, n_hi) == (
        1000,
        math.floor(1000 - stats.Z * 10),
        math.ceil(1000 + stats.Z * 10),
    )
    assert avg == Decimal(40)
    half = stats.Z * math.sqrt(20**2 + (40 * 10) ** 2) / 1000
    assert float(a_lo) == pytest.approx(40 - half) and float(a_hi) == pytest.approx(40 + half)
    # a count never below 0, an average inside its argument's range (17..59 under age < 60)
    answers[count_layout.offset] = 3.0
    answers[sum_layout.offset] = 3 * 58.0 / sum_layout.scale
    [(n, n_lo, n_hi, avg, a_lo, a_hi)] = rewriter.postprocess(plan, answers, se)
    assert n_lo == 0 and n == 3 and a_hi == Decimal(59) and 17 <= a_lo <= avg


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT lapras_interval_low(stddev(age)) FROM adult", "lapras_interval_low of stddev"),
        ("SELECT count(*), lapras_interval_high(count(*) + 1) FROM adult", "one aggregate"),
        ("SELECT lapras_interval_low(count(*), 2) FROM adult", "one aggregate"),
    ],
)
def test_refusals_say_what_is_accepted(sql: str, words: str) -> None:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.Refused), st
    assert st.error.sqlstate == "0A000" and words in st.error.message
    assert "interval" in (st.error.hint or "")
