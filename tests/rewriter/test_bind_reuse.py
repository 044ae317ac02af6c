"""``rewriter.bind`` keeps what does not depend on the parameters between the bindings of a
statement (rewriter.reduce ``_Static``): its plans must be exactly those of a binding from
scratch, the same batch key (stored answers are found by it), the same errors."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import rewriter
from rewriter import reduce as reduce_module
from rewriter.reduce import reduce

ADULT = rewriter.load_schema(__file__.rsplit("/tests/", 1)[0] + "/sql_fixtures/adult/lapras.toml")
RANGE = "SELECT count(*) FROM adult WHERE age BETWEEN $1 AND $2 AND sex = $3 AND income = $4"

CASES: list[tuple[str, list[tuple[Any, ...]]]] = [
    (
        RANGE,
        [(17 + i, 20 + 2 * i, ("Male", "Female")[i % 2], ">50K") for i in range(6)]
        + [("30", "40", "Male", "<=50K"), (30, 40, None, "<=50K"), (30.0, 40, "Male", "x")]
        + [(Decimal("30.5"), 40, "Male", ">50K"), (True, 40, "Male", ">50K"), (1, 2)],
    ),
    (
        "SELECT sex, count(*), avg(hours_per_week) FROM adult WHERE age BETWEEN $1 AND $2 "
        "GROUP BY sex",
        [(17, 40), (30, 20), (None, 3), (25, 60)],
    ),
    (
        "SELECT education, count(*) FROM adult WHERE age >= $1 AND education IN ($2, $3) "
        "GROUP BY 1",
        [(20, "Bachelors", "Masters"), (30, "Bachelors", "Bachelors"), (30, None, "Masters")],
    ),
    (
        "SELECT sex, count(*) FROM adult WHERE age > $1 AND sex = $2 GROUP BY 1 "
        "HAVING count(*) > $3 LIMIT $4",
        [(30, "Male", 10, 5), (31, "Female", 0, 1), (30, "Male", 10, -1), (30, "Male", 1, "x")],
    ),
    (
        "SELECT race, sex, count(*), sum(hours_per_week) FILTER (WHERE age > $1) FROM adult "
        "GROUP BY ROLLUP(race, sex) ORDER BY 3 DESC LIMIT $2",
        [(30, 3), (40, 10), (50, 0)],
    ),
    (
        "SELECT age / 10 AS decade, count(*) FROM adult WHERE age + $1 > 50 GROUP BY 1 ORDER BY 1",
        [(5,), (10,), (0,)],
    ),
    (
        "SELECT count(*) FROM adult WHERE age = $1 UNION ALL "
        "SELECT count(*) FROM adult WHERE age = $2",
        [(30, 31), (40, 40)],
    ),
    (
        "SELECT sum(education_num), count(*) FROM adult WHERE capital_gain >= $1 AND age < $2",
        [(1000, 50), (999, 40), (0, 90)],
    ),
    (
        "SELECT workclass, count(*) FROM adult WHERE occupation <> $1 GROUP BY workclass "
        "HAVING avg(age) > $2 ORDER BY 2 DESC OFFSET $3",
        [("?", 30, 1), ("Sales", 40, 0)],
    ),
    ("SELECT sex, count(*) * $1 FROM adult GROUP BY sex", [(2,), (3,)]),
    ("SELECT age, count(*) FROM adult WHERE sex = $1 GROUP BY age", [("Male",), ("Female",)]),
]


def _summary(plan: rewriter.Plan) -> tuple[object, ...]:
    return (
        plan.table,
        plan.view,
        plan.batch.key,
        repr(plan.domain),
        plan.measures,
        plan.columns,
        repr(plan.group_keys),
        repr(plan.post),
        repr(plan.fingerprint),
        repr(plan.layouts),
        repr(plan.ranges),
        tuple(_summary(p) for p in plan.parts),
    )


def _outcome(fn: Any) -> object:
    try:
        return _summary(fn())
    except Exception as e:  # compare what the client would be told
        return (type(e).__name__, getattr(e, "sqlstate", None), str(e))


@pytest.mark.parametrize("sql, values", CASES, ids=[c[0][:60] for c in CASES])
def test_bind_again_is_a_bind_from_scratch(sql: str, values: list[tuple[Any, ...]]) -> None:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.DPStatement) and st.plan is None
    for _ in range(2):  # the second round: everything kept from the first
        for params in values:
            scratch = _outcome(lambda p=params: reduce(st.prepared, p))
            kept = _outcome(lambda p=params: rewriter.bind(st, p))
            assert kept == scratch, params


def test_the_matrix_is_canonical_and_its_key_unchanged() -> None:
    [st] = rewriter.classify(RANGE, ADULT)
    assert isinstance(st, rewriter.DPStatement)
    plan = rewriter.bind(st, (30, 39, "Male", ">50K"))
    m = plan.batch.matrix
    assert m.has_canonical_format and m.nnz == 10
    # the same linear query written with literals (reduced at classification, from scratch)
    literal = RANGE.replace("$1", "30").replace("$2", "39")
    [lit] = rewriter.classify(literal.replace("$3", "'Male'").replace("$4", "'>50K'"), ADULT)
    assert isinstance(lit, rewriter.DPStatement) and lit.plan is not None
    assert lit.plan.batch.key == plan.batch.key


@pytest.mark.parametrize("sql, values", CASES, ids=[c[0][:60] for c in CASES])
def test_kept_comparison_masks_give_the_plans_of_an_empty_cache(
    sql: str, values: list[tuple[Any, ...]]
) -> None:
    """The comparisons' masks are kept by attribute, operator and coerced value
    (``rewriter.reduce._COMPARED``): with the cache warm from every other binding, in
    another order, each binding is what it is with the cache empty (values equal after
    coercion, such as 30, '30' and 30.0, share an entry; 30.5 does not)."""
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.DPStatement)
    empty = []
    for params in values:
        reduce_module._COMPARED.clear()
        empty.append(_outcome(lambda p=params: reduce(st.prepared, p)))
    for params in [*values, *values]:
        _outcome(lambda p=params: rewriter.bind(st, p))  # warm, in order
    for params, expected in reversed(list(zip(values, empty, strict=True))):
        assert _outcome(lambda p=params: rewriter.bind(st, p)) == expected, params
        assert _outcome(lambda p=params: reduce(st.prepared, p)) == expected, params
