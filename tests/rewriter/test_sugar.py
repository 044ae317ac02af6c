"""rewriter.sugar: ANY/ALL over constant arrays and row comparisons, written out as PostgreSQL
defines them. The array input is diffed against PostgreSQL's own reading of it; the rewritten
conditions are diffed against PostgreSQL over every combination of values (NULL included)."""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
import pytest
import sqlglot

from rewriter.dialect import POSTGRES
from rewriter.pgtypes import array_elements
from rewriter.sugar import expand

ARRAYS = ["{a,b}", '{ "x y" , NULL, "NULL", c}', "{}", '{"q\\"x",\'}', "{  spaced  ,t}", '{"",a}']


@pytest.mark.parametrize("text", ARRAYS)
def test_array_input_is_read_as_postgresql_reads_it(pg: Any, text: str) -> None:
    with psycopg.connect(pg.admin_dsn) as conn:
        theirs = conn.execute("SELECT %s::text[]", (text,)).fetchone()
    assert theirs is not None
    assert array_elements(text) == theirs[0]


CONDITIONS = [
    "x = ANY (ARRAY[1, 2])", "x = ANY (ARRAY[1, NULL])", "x <> ALL (ARRAY[1, 2])",
    "x > ANY ('{1,3}'::int[])", "x = ANY (ARRAY['1', '3']::int[])", "x <= ALL ('{2,NULL}'::int[])", "x = ANY ('{}'::int[])",
    "x = ALL ('{}'::int[])", "(x, y) = (1, 2)", "(x, y) <> (1, NULL)",
    "(x, y) IN ((1, 2), (2, NULL))", "(x, y) NOT IN ((1, 1), (3, 2))",
    "x::text LIKE ANY (ARRAY['1%', '3'])", "x::text ILIKE ALL (ARRAY['%', '2'])",
]  # fmt: skip
VALUES = [1, 2, 3, None]


@pytest.mark.parametrize("cond", CONDITIONS)
def test_written_out_conditions_are_postgresql_s(pg: Any, cond: str) -> None:
    tree = sqlglot.parse_one(f"SELECT {cond} FROM t", read=POSTGRES)
    expand(tree)
    written = tree.expressions[0].sql(dialect=POSTGRES)
    assert "ANY" not in written.upper() and "ALL" not in written.upper().replace("CALL", "")
    rows = list(itertools.product(VALUES, VALUES))
    values = ", ".join(
        f"({'NULL' if x is None else x}::int, {'NULL' if y is None else y}::int)" for x, y in rows
    )
    with psycopg.connect(pg.admin_dsn) as conn:
        theirs = conn.execute(f"SELECT {cond} FROM (VALUES {values}) AS t(x, y)").fetchall()
        ours = conn.execute(f"SELECT {written} FROM (VALUES {values}) AS t(x, y)").fetchall()
    assert ours == theirs, written
