"""Random composed statements (rewriter/compose.py), noise off, diffed against PostgreSQL.

A seeded generator writes statements of every composed shape over Adult: aggregates over a
grouped aggregate (with WHERE on its values), window functions over one, two grouped
aggregates joined on their key (INNER, LEFT, FULL, USING or ON), scalar thresholds released
first, ``IN`` a top-N subquery, the table joined to its own top-N subquery, INTERSECT/EXCEPT
of thresholded groupings, CTEs read twice. Each is answered with every release exact (the
batch applied to the pinned histogram) and must equal PostgreSQL's answer: the same column
types, the same rows (as a multiset; numbers to 1e-9). Inner aggregates group by columns
whose every declared value occurs in Adult, and a filtered one keeps ``HAVING count(*) > 0``,
so that the groups the proxy returns (all public ones) are the groups PostgreSQL returns.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pins import pin_table

import rewriter
from dp.pin import Pin

ADULT = rewriter.load_schema(__file__.rsplit("/tests/", 1)[0] + "/sql_fixtures/adult/lapras.toml")
#: group keys every declared value of which occurs in Adult
KEYS = ("sex", "race", "income", "relationship", "marital_status", "education", "workclass")
NUMBERS = ("age", "hours_per_week", "education_num")
FILTERS = (
    "sex = 'Female'",
    "age > 40",
    "income = '>50K'",
    "hours_per_week BETWEEN 30 AND 50",
    "race <> 'White'",
)
INNER_AGGS = ("count(*)", "avg({n})", "sum({n})", "max({n})", "min({n})", "count(DISTINCT {n})")
OUTER_AGGS = ("count(*)", "sum(v)", "avg(v)", "max(v)", "min(v)", "count(DISTINCT v)")
COUNT = int(__import__("os").environ.get("COMPOSE_CASES", "60"))


def _inner(rng: random.Random, key: str, *, filtered: bool | None = None) -> str:
    agg = rng.choice(INNER_AGGS).format(n=rng.choice(NUMBERS))
    where = (
        rng.choice(FILTERS) if (filtered if filtered is not None else rng.random() < 0.5) else ""
    )
    sql = f"SELECT {key}, {agg} AS v FROM adult"
    if where:
        sql += f" WHERE {where} GROUP BY {key} HAVING count(*) > 0"
    else:
        sql += f" GROUP BY {key}"
    return sql


def _statement(rng: random.Random) -> str:
    key, other = rng.sample(KEYS, 2)
    num = rng.choice(NUMBERS)
    shape = rng.randrange(8)
    if shape == 0:  # an aggregate over a grouped aggregate
        outer = rng.choice(OUTER_AGGS)
        where = f" WHERE v > {rng.randint(1, 5000)}" if rng.random() < 0.4 else ""
        return f"SELECT {outer} AS a, count(*) AS groups FROM ({_inner(rng, key)}) t{where}"
    if shape == 1:  # window functions over a released relation
        win = rng.choice(
            (
                "rank() OVER (ORDER BY v DESC)",
                "sum(v) OVER ()",
                f"v - lag(v, 1, 0) OVER (ORDER BY v, {key})",  # ties broken: a total order
                f"ntile(3) OVER (ORDER BY v, {key})",
                "cume_dist() OVER (ORDER BY v)",
                f"sum(v) OVER (ORDER BY {key} ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)",
            )
        )
        return f"SELECT {key}, v, {win} AS w FROM ({_inner(rng, key)}) t"
    if shape == 2:  # two grouped aggregates joined on their key
        join = rng.choice(("JOIN", "LEFT JOIN", "FULL JOIN"))
        cond = rng.choice((f"USING ({key})", f"ON a.{key} = b.{key}"))
        pick = f"{key}" if cond.startswith("USING") else f"a.{key}"
        inner_b = _inner(rng, key, filtered=True)
        if rng.random() < 0.5:
            inner_b += f" AND count(*) > {rng.randint(10, 3000)}"
        return (
            f"SELECT {pick}, a.v, b.v AS w FROM ({_inner(rng, key)}) a {join} ({inner_b}) b {cond}"
        )
    if shape == 3:  # a scalar threshold released first
        where = f" WHERE {rng.choice(FILTERS)}" if rng.random() < 0.5 else ""
        return (
            f"SELECT {other}, count(*) FROM adult WHERE {num} > (SELECT avg({num}) FROM "
            f"adult{where}) GROUP BY {other} HAVING count(*) > 0"
        )
    if shape == 4:  # IN a top-N subquery
        n = rng.randint(1, 3)
        return (
            f"SELECT {other}, count(*), avg({num}) FROM adult WHERE {key} IN (SELECT {key} FROM "
            f"adult GROUP BY {key} ORDER BY count(*) DESC LIMIT {n}) GROUP BY {other} "
            f"HAVING count(*) > 0"
        )
    if shape == 5:  # the table joined to its own top-N subquery
        n = rng.randint(1, 3)
        return (
            f"SELECT a.{key}, count(*), sum(a.{num}) FROM adult a JOIN (SELECT {key} FROM adult "
            f"GROUP BY {key} ORDER BY count(*) DESC LIMIT {n}) t ON a.{key} = t.{key} "
            f"GROUP BY a.{key}"
        )
    if shape == 6:  # INTERSECT / EXCEPT of thresholded groupings
        op = rng.choice(("INTERSECT", "EXCEPT", "UNION"))
        return (
            f"SELECT {key} FROM adult GROUP BY {key} HAVING count(*) > {rng.randint(10, 5000)} "
            f"{op} SELECT {key} FROM adult WHERE {rng.choice(FILTERS)} GROUP BY {key} "
            f"HAVING count(*) > {rng.randint(10, 2000)}"
        )
    # a CTE read twice: each group against the average group
    return (
        f"WITH c AS ({_inner(rng, key)}) SELECT {key}, v, v > (SELECT avg(v) FROM c) AS above "
        f"FROM c"
    )


CASES = [_statement(random.Random(seed)) for seed in range(COUNT)]


@pytest.fixture(scope="module")
def adult_pin(pg: Any) -> Pin:
    return pin_table(pg.aggregator_dsn, ADULT, "adult")


def _norm(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return sorted(([float(v) if isinstance(v, Decimal) else v for v in r] for r in rows), key=repr)


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return abs(x - y) <= 1e-9 * max(1.0, abs(y))
    return bool(x == y)


@pytest.mark.parametrize("sql", CASES, ids=[f"case{i}" for i in range(COUNT)])
def test_random_composition_equals_postgresql(sql: str, pg: Any, adult_pin: Pin) -> None:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.Composed | rewriter.DPStatement), st
    if isinstance(st, rewriter.DPStatement):  # folded into one statement: the golden cases'
        return
    exact = adult_pin

    def answer(plan: rewriter.Plan) -> rewriter.Released:
        return rewriter.Released(answers=plan.batch.answer(exact.marginal(plan.batch.domain)))

    result = rewriter.run_composed(st, ADULT, answer)
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        cur = conn.execute(sql)
        theirs = cur.fetchall()
        assert [(d.name, d.type_code) for d in cur.description or ()] == [
            (c.name, c.type_oid) for c in result.columns
        ]
    ours, ref = _norm(list(result.rows)), _norm(theirs)
    assert len(ours) == len(ref), (ours, ref)
    for a, b in zip(ours, ref, strict=True):
        assert all(_same(x, y) for x, y in zip(a, b, strict=True)), (a, b)


def test_the_generator_writes_every_shape() -> None:
    kinds = {
        "composed": sum(
            isinstance(rewriter.classify(s, ADULT)[0], rewriter.Composed) for s in CASES
        )
    }
    assert kinds["composed"] >= COUNT * 3 // 4
