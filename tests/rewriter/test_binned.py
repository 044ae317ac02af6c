"""Expressions over columns declared in bins (rewriter.binned), diffed against PostgreSQL.

A protected table holds, for each bin of a ``double precision``, a ``numeric`` and an
``integer`` column declared by ``edges``, the values where an expression is most likely to
change inside a bin: both edges, the last double (or a decimal of many places) below the
upper edge, zero and minus zero, the smallest normal doubles, values in the middle. An
expression the rewriter answers over such a column must take one value on each whole bin:
so PostgreSQL's answer over these values, grouped by the expression, must be the rewriter's
(noise off, the exact histogram). Expressions that do cut a bin must be refused (0A000, the
message naming the expression and the bin), and the ones PostgreSQL itself computes with a
rounding that crosses an edge (``width_bucket`` in double precision at ``pred(-60)``) are.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pins import exact_answer, pin_table

import rewriter
from dp.pin import Pin
from proxy import provision
from rewriter.schema import Schema

TOML = """
[tables.lapras_binned]
schema = "public"
[tables.lapras_binned.columns]
x = "double precision"
y = "numeric"
k = "integer"
[tables.lapras_binned.attributes.x]
kind = "numeric"
edges = [-90, -80, -70, -60, -50, -40, -30, -20, -10, 0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
nullable = true
[tables.lapras_binned.attributes.y]
kind = "numeric"
edges = [0, 0.5, 1, 10, 100]
nullable = true
[tables.lapras_binned.attributes.k]
kind = "numeric"
edges = [0, 1000, 5000, 10000]
"""

X_EDGES = list(range(-90, 91, 10))
X_VALUES: list[float | None] = [
    *sorted(
        {
            v
            for lo, hi in itertools.pairwise(X_EDGES)
            for v in (
                float(lo),
                math.nextafter(float(hi), -math.inf),
                (lo + hi) / 2,
                lo + 0.1,
                lo + 1,
            )
        }
        | {0.0, -0.0, 2.2250738585072014e-308, -2.2250738585072014e-308, 1e-300, -1e-300}
    ),
    None,
]
Y_VALUES = [Decimal(v) for v in ("0", "0.25", "0.4999999999999999999999", "0.5", "0.9999999",
            "1", "9.99999999999999999999", "10", "55.5", "99.9999999999")] + [None]  # fmt: skip
K_VALUES = [0, 1, 999, 1000, 4999, 5000, 9999]

KEYS = [
    "floor(x / 10) * 10", "floor(x / 30) * 30", "floor(x / 20) * 20",
    "CASE WHEN x >= 0 THEN 'north' ELSE 'south' END", "abs(floor(x / 10))", "x >= 30 AND x < 50",
    "greatest(floor(x / 10), 0)", "coalesce(floor(x / 10), -999)", "x IN (95, 100)",
    "CASE WHEN x < -30 THEN 1 WHEN x < 0 THEN 2 WHEN x < 30 THEN 3 ELSE 4 END",
    "(floor(x / 10) * 10)::int", "floor(x / 10)::numeric(4, 1)",
    "CASE WHEN y < 1 THEN 'small' ELSE 'big' END", "y >= 10", "floor(y * 0.01)",
    "y < 0.5 OR y >= 10",
    "k / 5000", "floor(k / 5000.0)", "CASE WHEN k >= 5000 THEN 'high' END", "k < 1000",
    "floor(x / 10) * 10 + k / 5000",
]  # fmt: skip

#: Expressions that take several values on some bin (PostgreSQL itself shows it on the table:
#: some, floor(y / 10) at y = 9.99999999999999999999, only by PostgreSQL's own rounding).
CUTS = [
    "round(x)", "x::int", "floor(x / 7)", "x > 15", "floor(y)", "k / 500", "k % 2", "sign(x)",
    "x IN (1, 2)", "ceil(x / 10)", "trunc(x / 10)", "abs(x) >= 55", "x >= 30 AND x < 45",
    "floor(y)::int", "floor(y * 2)", "floor(y / 10)", "width_bucket(x, -180, 180, 12)",
    "floor(x * 1.5)", "y = 0.5",
]  # fmt: skip


#: Rows of the declared domain: subnormal doubles are in no cell (rewriter.binned.DBL_MIN).
INSIDE = "(x IS NULL OR x = 0 OR abs(x) >= 2.2250738585072014e-308)"


@pytest.fixture(scope="module")
def schema(pg: Any) -> Schema:
    rows = [
        (x, y, k)
        for i, x in enumerate(X_VALUES)
        for j, y in enumerate(Y_VALUES)
        for k in K_VALUES
        if (i + j) % 3 == 0 or x is None or y is None
    ]
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lapras_binned")
        conn.execute("CREATE TABLE public.lapras_binned (x double precision, y numeric, k integer)")
        with conn.cursor().copy("COPY public.lapras_binned FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        conn.execute(f"GRANT SELECT ON public.lapras_binned TO {provision.AGGREGATOR}")
    return rewriter.parse_schema(TOML, "test-binned.toml")


@pytest.fixture(scope="module")
def pin(pg: Any, schema: Schema) -> Pin:
    return pin_table(pg.aggregator_dsn, schema, "lapras_binned")


def _theirs(pg: Any, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def _norm(v: object) -> object:
    return v + 0.0 if isinstance(v, float) else v  # -0 is 0: one group (PostgreSQL's hash)


@pytest.mark.parametrize("expr", KEYS)
def test_expression_that_keeps_each_bin_whole(expr: str, pg: Any, schema: Schema, pin: Pin) -> None:
    sql = f"SELECT {expr} AS v, count(*) FROM lapras_binned GROUP BY 1"
    [st] = rewriter.classify(sql, schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    ours = sorted((tuple(map(_norm, r)) for r in exact_answer(st.plan, pin) if r[-1]), key=repr)
    theirs = sorted(
        (
            tuple(map(_norm, r))
            for r in _theirs(pg, sql.replace("GROUP BY", f"WHERE {INSIDE} GROUP BY"))
        ),
        key=repr,
    )
    assert ours == theirs


@pytest.mark.parametrize("expr", CUTS)
def test_expression_that_cuts_a_bin_is_refused(expr: str, pg: Any, schema: Schema) -> None:
    sql = f"SELECT {expr} AS v, count(*) FROM lapras_binned GROUP BY 1"
    [st] = rewriter.classify(sql, schema)
    assert isinstance(st, rewriter.Refused), st
    assert st.error.sqlstate == "0A000"
    assert "cuts the declared bin" in st.error.message
    # and it does: some declared bin holds values PostgreSQL maps to different results
    column = next(c for c in ("x", "y", "k") if c in expr.replace("x::", "x ::"))
    edges = {"x": X_EDGES, "y": [0, 0.5, 1, 10, 100], "k": [0, 1000, 5000, 10000]}[column]
    cases = " ".join(
        f"WHEN {column} >= {lo} AND {column} < {hi} THEN {i}"
        for i, (lo, hi) in enumerate(itertools.pairwise(edges))
    )
    split = _theirs(
        pg,
        f"SELECT CASE {cases} END AS bin, count(DISTINCT ({expr})) FROM lapras_binned "
        f"WHERE {column} IS NOT NULL AND {INSIDE} GROUP BY 1 HAVING count(DISTINCT ({expr})) > 1",
    )
    assert split, f"PostgreSQL keeps every bin whole for {expr}"


@pytest.mark.parametrize(
    "cond",
    ["k <= 999", "k BETWEEN 1000 AND 4999", "k > 4999", "k >= 5000 AND k <= 9999",
     "x >= -10 AND x < 30", "y < 1 AND y >= 0.5", "k < 999.5"],
)  # fmt: skip
def test_bounds_on_bin_edges(cond: str, pg: Any, schema: Schema, pin: Pin) -> None:
    """Inclusive bounds on an integer column's last value in a bin are exact."""
    sql = f"SELECT count(*), count(y) FROM lapras_binned WHERE {cond}"
    [st] = rewriter.classify(sql, schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    theirs = _theirs(pg, sql.replace("WHERE", f"WHERE {INSIDE} AND"))
    assert exact_answer(st.plan, pin) == theirs


def test_subnormal_doubles_are_outside_the_declared_domain(pin: Pin, pg: Any) -> None:
    """The pin leaves them out of every cell (so x / 10 never rounds to -0 in a bin)."""
    total = _theirs(pg, f"SELECT count(*) FROM lapras_binned WHERE {INSIDE}")[0][0]
    assert pin.total == total
    assert total < _theirs(pg, "SELECT count(*) FROM lapras_binned")[0][0]
