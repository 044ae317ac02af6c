"""The aggregator's SQL for a view's exact histogram, and its rows as a dense vector.

One pass on the backend: every row is mapped to its cell index (C order over the view's
attributes, NULL as the last cell of a nullable attribute) and PostgreSQL groups by it. Rows
with a value outside the declared domain get no index and are not counted (the declaration
is the public domain; document such rows as out of scope).

>>> from rewriter.schema import parse_schema
>>> s = parse_schema('''
... [tables.t.columns]
... a = "integer"
... [tables.t.attributes.a]
... kind = "integer"
... min = 0
... max = 9
... [tables.t.views]
... v = ["a"]
... ''', "x")
>>> print(histogram_sql(s, "t", "v"))
SELECT cell, count(*) AS n FROM (SELECT ((CASE WHEN "a" BETWEEN 0 AND 9 THEN ("a" - 0) END))::int8 AS cell FROM "public"."t") AS cells WHERE cell IS NOT NULL GROUP BY cell
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from .errors import UndefinedTableError, UnsupportedError
from .schema import AttributeDecl, DateUnit, Kind, Schema, ViewDecl


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _num(x: object) -> str:
    from fractions import Fraction

    if isinstance(x, Fraction):
        if x.denominator == 1:
            return str(x.numerator)
        return f"({x.numerator}::numeric / {x.denominator})"
    return str(x)


def cell_expr(attr: AttributeDecl) -> str:
    """SQL for the cell index of ``attr`` (NULL when the value is outside the domain)."""
    c = _q(attr.name)
    null = f"WHEN {c} IS NULL THEN {attr.null_cell} " if attr.null_cell is not None else ""
    if attr.kind is Kind.CATEGORICAL:
        whens = " ".join(f"WHEN {c} = {_lit(v)} THEN {i}" for i, v in enumerate(attr.values))
        return f"CASE {null}{whens} END"
    if attr.kind is Kind.BOOLEAN:
        return f"CASE {null}WHEN {c} THEN 1 WHEN NOT {c} THEN 0 END"
    if attr.kind is Kind.NUMERIC:
        whens = " ".join(
            f"WHEN {c} >= {_num(lo)} AND {c} < {_num(hi)} THEN {i}"
            for i, (lo, hi) in enumerate(attr.bins)
        )
        return f"CASE {null}{whens} END"
    lo, hi = attr.bins[0][0], attr.bins[-1][1]
    if attr.kind is Kind.DATE:
        first = dt.date.fromordinal(int(lo))
        last = dt.date.fromordinal(int(hi))
        inside = f"{c} BETWEEN DATE {_lit(first.isoformat())} AND DATE {_lit(last.isoformat())}"
        if attr.date_unit is DateUnit.DAY:
            idx = f"({c} - DATE {_lit(first.isoformat())})"
        elif attr.date_unit is DateUnit.MONTH:
            idx = f"((EXTRACT(YEAR FROM {c})::int * 12 + EXTRACT(MONTH FROM {c})::int) - {first.year * 12 + first.month})"
        else:
            idx = f"(EXTRACT(YEAR FROM {c})::int - {first.year})"
        return f"CASE {null}WHEN {inside} THEN {idx} END"
    widths = {b - a for a, b in attr.bins}
    contiguous = all(attr.bins[i][1] + 1 == attr.bins[i + 1][0] for i in range(len(attr.bins) - 1))
    if len(widths) == 1 and contiguous:
        w = int(widths.pop()) + 1
        idx = f"({c} - {_num(lo)})" if w == 1 else f"(({c} - {_num(lo)}) / {w})"
        return f"CASE {null}WHEN {c} BETWEEN {_num(lo)} AND {_num(hi)} THEN {idx} END"
    whens = " ".join(
        f"WHEN {c} BETWEEN {_num(a)} AND {_num(b)} THEN {i}" for i, (a, b) in enumerate(attr.bins)
    )
    return f"CASE {null}{whens} END"


def _view(schema: Schema, table: str, view: str) -> tuple[str, str, ViewDecl]:
    t = schema.tables.get(table)
    if t is None:
        raise UndefinedTableError(f"table {table} is not a declared protected table")
    for v in t.views:
        if v.name == view:
            return t.schema, t.name, v
    raise UnsupportedError(f"view {view} is not declared for protected table {table}")


def histogram_sql(schema: Schema, table: str, view: str) -> str:
    """The one-pass aggregator query; its rows are ``(cell int8, n int8)``."""
    sch, name, v = _view(schema, table, view)
    terms = []
    stride = 1
    for attr in reversed(v.attributes):
        e = f"({cell_expr(attr)})"
        terms.append(e if stride == 1 else f"{e} * {stride}")
        stride *= attr.size
    index = " + ".join(reversed(terms))
    return (
        f"SELECT cell, count(*) AS n FROM (SELECT ({index})::int8 AS cell FROM {_q(sch)}.{_q(name)}) AS cells "
        "WHERE cell IS NOT NULL GROUP BY cell"
    )


def histogram_from_rows(
    schema: Schema, table: str, view: str, rows: Iterable[tuple[int, int]]
) -> npt.NDArray[np.float64]:
    """The dense histogram (``float64``, one entry per cell of the view) from the query's rows."""
    _, _, v = _view(schema, table, view)
    x = np.zeros(v.size, dtype=np.float64)
    for cell, n in rows:
        x[int(cell)] += float(n)
    return x
