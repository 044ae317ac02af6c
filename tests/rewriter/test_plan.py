"""The IR and post-processing: group layout, HAVING/ORDER/LIMIT, rounding, parameters."""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import rewriter
from dp.domain import Domain
from dp.errors import DomainTooLargeError
from rewriter.reduce import marginal

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)


def _plan(sql: str) -> rewriter.Plan:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    return st.plan


def test_issue_example() -> None:
    plan = _plan("SELECT sex, count(*) FROM adult WHERE age BETWEEN 30 AND 39 GROUP BY 1")
    assert plan.table == "public.adult" and plan.view == "(age, sex)"
    assert plan.batch.domain.names == ("age", "sex")
    assert plan.group_keys == (("Female",), ("Male",))
    assert [(c.name, c.type_oid) for c in plan.columns] == [("sex", 25), ("count", 20)]
    w = plan.batch.dense().reshape(2, 74, 2)
    assert w[0, 13:23, 0].sum() == 10 and w.sum() == 20  # ages 30..39, Female
    assert w[0, 13:23, 0].min() == 1 and w[1, 13:23, 1].min() == 1
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


def test_the_marginal_of_exactly_the_columns_used() -> None:
    """A statement is reduced over the marginal of the attributes it uses, named in the table's
    declaration order whatever the statement's order; no column: the empty marginal."""
    assert _plan("SELECT count(*) FROM adult WHERE race = 'White'").view == "(race)"
    assert _plan("SELECT count(*) FROM adult WHERE race = 'White' AND age > 30").view == (
        "(age, race)"
    )
    plan = _plan("SELECT income, avg(hours_per_week) FROM adult WHERE sex = 'Male' GROUP BY 1")
    assert plan.view == "(sex, hours_per_week, income)"
    assert plan.batch.domain.names == ("sex", "hours_per_week", "income")
    assert plan.batch.domain.size == 2 * 99 * 2
    plan = _plan("SELECT count(*) FROM adult")
    assert (
        plan.view == "()" and plan.batch.domain.size == 1 and plan.batch.dense().tolist() == [[1]]
    )
    # a derived table's SELECT * uses no column by itself
    assert _plan("SELECT count(*) FROM (SELECT * FROM adult) AS t").view == "()"


def test_any_four_columns_and_no_more_than_the_cell_limit() -> None:
    t = ADULT.tables["adult"]
    assert t.cell_limit == 5_000_000
    for combo in itertools.combinations(t.attributes, 4):
        view = marginal(t, frozenset(combo))
        assert view.names == combo and view.size <= t.cell_limit  # declaration order
    with pytest.raises(DomainTooLargeError):
        marginal(
            t, frozenset(["age", "education", "education_num", "hours_per_week", "native_country"])
        )
    [st] = rewriter.classify(
        "SELECT count(*) FROM adult WHERE age > 30 AND education = 'Bachelors' "
        "AND hours_per_week < 40 AND native_country = 'Mexico' AND sex = 'Male'",
        ADULT,
    )
    assert isinstance(st, rewriter.Refused) and st.error.sqlstate == "54000"
    assert "9,846,144 cells" in st.error.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FILTER (WHERE age > 30) AS a, count(*) FILTER (WHERE age >= 31) AS b "
        "FROM adult",
        "SELECT count(*), count(*) FILTER (WHERE age < 200) FROM adult",
        "SELECT sex, count(*), count(*) FILTER (WHERE sex IN ('Male', 'Female')) FROM adult "
        "GROUP BY 1",
    ],
)
def test_measures_with_the_same_weights_share_their_rows(sql: str) -> None:
    plan = _plan(sql)
    assert plan.row_width * plan.num_groups == plan.batch.num_queries
    rows = rewriter.postprocess(plan, np.full(plan.batch.num_queries, 7.0))
    assert all(row[-1] == row[-2] == 7 for row in rows)


def test_group_by_returns_every_public_group() -> None:
    plan = _plan("SELECT native_country, income, count(*) FROM adult GROUP BY 1, 2")
    assert plan.num_groups == 84 and len(rewriter.postprocess(plan, np.zeros(84))) == 84


def test_pin_sql_shape() -> None:
    """One statement pins the whole table: one int4 cell per declared attribute (in
    declaration order), then an int8 count; its rows are a pin whose marginals are the exact
    histograms plans are answered on."""
    t = ADULT.tables["adult"]
    sql = rewriter.pin_sql(ADULT, "adult")
    assert sql.count("GROUP BY") == 2 and sql.count('"public"."adult"') == 1
    assert sql.count("::int4") == len(t.attributes) == 14 and sql.count("::int8") == 1
    assert '"fnlwgt"' not in sql  # no domain: not an attribute
    assert rewriter.pin_domain(ADULT, "adult") == t.domain  # the clamped columns' values too
    assert sql.count(", sum(s") == 2**2 - 1  # products of capital_gain's and capital_loss's shares
    names = [n for n, a in t.attributes.items() if not a.clamp]  # no value axes
    domain = rewriter.pin_domain(ADULT, "adult", names)
    assert domain.names == tuple(names)
    k = len(names)
    first = [0] * k
    last = [t.attributes[n].size - 1 for n in names]
    ones = [1] * k
    pin = rewriter.pin_from_rows(domain, [(*first, 3), (*last, 2), (*ones, 4)])
    assert pin.total == 9
    # a row with no cell in some attribute (-1: a value outside its domain) is left out
    assert rewriter.pin_from_rows(domain, [(*first, 3), (*first[:-1], -1, 5)]).total == 3
    assert pin.marginal(Domain(())).tolist() == [9.0]
    income = pin.marginal(domain.marginal(["income"])).tolist()
    assert income == [3.0, 6.0]
    age_sex = pin.marginal(domain.marginal(["age", "sex"]))
    assert age_sex.shape == (148,) and age_sex.sum() == 9
    assert (age_sex[0], age_sex[1 * 2 + 1], age_sex[147]) == (3, 4, 2)
    # a plan's batch is answered on the marginal it is over
    plan = _plan("SELECT income, count(*) FROM adult GROUP BY 1")
    answer = plan.batch.answer(pin.marginal(plan.batch.domain))
    assert rewriter.postprocess(plan, answer) == [("<=50K", 3), (">50K", 6)]


def test_pin_from_copy_parses_fixed_width_tuples_and_refuses_a_truncated_stream() -> None:
    import struct

    domain = Domain.of(("a", 3), ("b", 2))
    header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)

    def row(a: int, b: int, n: int) -> bytes:
        return struct.pack(">hiiiiiq", 3, 4, a, 4, b, 8, n)

    body = row(0, 1, 5) + row(2, 0, 7) + row(-1, 1, 9) + row(1, -1, 11)
    stream = header + body + b"\xff\xff"
    pin = rewriter.pin_from_copy(domain, bytearray(stream))
    assert pin.total == 12  # the rows with a -1 (no cell) are left out
    assert pin.marginal(domain).tolist() == [0, 5, 0, 0, 7, 0]
    for bad in (stream[:-2], stream[:-5], b"COPY" + stream[4:]):
        with pytest.raises(ValueError):
            rewriter.pin_from_copy(domain, bad)
