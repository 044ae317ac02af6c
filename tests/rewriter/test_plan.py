"""The IR and post-processing: group layout, HAVING/ORDER/LIMIT, rounding, parameters."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import rewriter

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)


def _plan(sql: str) -> rewriter.Plan:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    return st.plan


def test_issue_example() -> None:
    plan = _plan("SELECT sex, count(*) FROM adult WHERE age BETWEEN 30 AND 39 GROUP BY 1")
    assert plan.table == "public.adult" and plan.view == "age_sex_income"
    assert plan.group_keys == (("Female",), ("Male",))
    assert [(c.name, c.type_oid) for c in plan.columns] == [("sex", 25), ("count", 20)]
    w = plan.batch.dense().reshape(2, 74, 2, 2)
    assert w[0, 13:23, 0, :].sum() == 20 and w.sum() == 40  # ages 30..39, Female, both incomes
    assert plan.batch.sensitivity_l2 == 1.0
    rows = rewriter.postprocess(plan, np.array([10.4, -2.6]))
    assert rows == [("Female", 10), ("Male", 0)]  # rounded, clamped at 0


def test_noisy_postprocessing_having_order_limit() -> None:
    plan = _plan(
        "SELECT race, count(*) AS n, avg(age) FROM adult GROUP BY race HAVING count(*) > 5 ORDER BY n DESC LIMIT 2"
    )
    # measures in canonical order: count(*), then sum(age); each row measures value / scale
    count, total_age = plan.layouts
    w = plan.row_width
    answers = np.zeros(plan.batch.num_queries)
    for g, total in enumerate([100, 3, 50, 7, 80]):
        answers[g * w + count.offset] = total / count.scale
        answers[g * w + total_age.offset] = total * 40.5 / total_age.scale
    rows = rewriter.postprocess(plan, answers)
    assert [r[0] for r in rows] == ["White", "Black"]
    assert rows[0][1] == 100 and rows[0][2] == Decimal("40.5")


def test_avg_of_empty_is_null_and_sum_of_empty_is_null() -> None:
    plan = _plan("SELECT sum(age), avg(age) FROM adult WHERE age > 200")
    assert rewriter.postprocess(plan, np.zeros(plan.batch.num_queries)) == [(None, None)]


def test_parameters_bind_and_describe() -> None:
    [st] = rewriter.classify(
        "SELECT count(*) FROM adult WHERE age > $1 AND sex = $2 LIMIT $3", ADULT
    )
    assert isinstance(st, rewriter.DPStatement) and st.plan is None
    assert st.param_types == (23, 25, 20)
    assert [(c.name, c.type_oid) for c in st.columns] == [("count", 20)]
    plan = rewriter.bind(st, [30, "Male", 10])
    assert plan.batch.num_queries == 1
    assert rewriter.fingerprint(st, [30, "Male", 10]).bindings == (30, "Male")
    with pytest.raises(rewriter.BindError):
        rewriter.bind(st, [30])
    with pytest.raises(rewriter.InvalidValueError):
        rewriter.bind(st, ["abc", "Male", 1])


def test_smallest_covering_view() -> None:
    assert _plan("SELECT count(*) FROM adult WHERE race = 'White'").view == "origin"
    assert (
        _plan("SELECT count(*) FROM adult WHERE race = 'White' AND age > 30").view == "demographics"
    )


def test_group_by_returns_every_public_group() -> None:
    plan = _plan("SELECT native_country, income, count(*) FROM adult GROUP BY 1, 2")
    assert plan.num_groups == 84 and len(rewriter.postprocess(plan, np.zeros(84))) == 84


def test_histogram_sql_shape() -> None:
    sql = rewriter.histogram_sql(ADULT, "adult", "age_sex_income")
    assert sql.count("GROUP BY") == 1 and '"public"."adult"' in sql
    x = rewriter.histogram_from_rows(ADULT, "adult", "age_sex_income", [(0, 3), (295, 2)])
    assert x.shape == (296,) and x.sum() == 5
