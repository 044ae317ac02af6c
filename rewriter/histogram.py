"""The aggregator's SQL that pins an epoch's data, and its result as a :class:`dp.pin.Pin`.

One ordinary statement (so that a distributed PostgreSQL-compatible engine behind the proxy --
Citus, Greenplum, Redshift -- can push it down): the inner ``GROUP BY`` over the raw declared
columns is the heavy scan, exactly PostgreSQL's own; the outer query maps each distinct value
combination to its cells (C order per attribute, NULL as the last cell of a nullable
attribute; ``-1`` for none) and sums the counts. A row with a value outside a declared domain
(or NULL in an attribute not declared nullable) has no cell there and is left out when the
result is read: the pin is one histogram over the whole domain, so that every marginal of it
is consistent with every other (``dp.pin``). At most one result row per row of the table,
usually far fewer.

>>> from rewriter.schema import parse_schema
>>> s = parse_schema('''
... [tables.t.columns]
... a = "integer"
... b = "text"
... [tables.t.attributes.a]
... kind = "integer"
... min = 0
... max = 9
... [tables.t.attributes.b]
... kind = "categorical"
... values = ["x", "y"]
... ''', "x")
>>> print(pin_sql(s, "t"))
SELECT coalesce(c0, -1)::int4, coalesce(c1, -1)::int4, sum(n)::int8 FROM (SELECT (CASE WHEN "a" BETWEEN 0 AND 9 THEN ("a" - 0) END) AS c0, (CASE WHEN "b" = 'x' THEN 0 WHEN "b" = 'y' THEN 1 END) AS c1, n FROM (SELECT "a", "b", count(*) AS n FROM "public"."t" GROUP BY "a", "b") AS g) AS cells GROUP BY 1, 2
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from dp.domain import Domain
from dp.pin import Pin, UnitRows

from . import clamp
from .binned import DBL_MIN
from .errors import UndefinedTableError, UnsupportedError
from .schema import AttributeDecl, DateUnit, Kind, Schema, TableDecl, ValueAxis


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
        # a double's bins hold normal doubles and zero: subnormal values are in no cell
        # (rewriter.binned, DBL_MIN)
        tiny = (
            f"WHEN {c} <> 0 AND abs({c}) < {DBL_MIN!r} THEN NULL "
            if attr.pg_type == "float8"
            else ""
        )
        return f"CASE {null}{tiny}{whens} END"
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


def _attributes(
    schema: Schema, table: str, names: Sequence[str] | None
) -> tuple[str, str, tuple[AttributeDecl, ...]]:
    t = schema.tables.get(table)
    if t is None:
        raise UndefinedTableError(f"table {table} is not a declared protected table")
    names = tuple(t.attributes) if names is None else names
    missing = [n for n in names if n not in t.attributes]
    if missing:
        raise UnsupportedError(f"{', '.join(missing)} is not a declared attribute of {table}")
    return t.schema, t.name, t.with_value_axes(names)  # the clamped columns' values too


def pin_sql(
    schema: Schema, table: str, attributes: Sequence[str] | None = None, *, seed: str = ""
) -> str:
    """The one statement that pins ``table`` over ``attributes`` (default: every declared
    attribute); its rows are ``(cell int4, ..., n int8)``, one cell per attribute, ``-1`` for
    a value with no cell (:func:`pin_from_copy` and :func:`pin_from_rows` leave those rows out).

    The rows with no cell are dropped after the statement, not by a ``WHERE`` in it: PostgreSQL
    would push such a condition into the inner ``GROUP BY`` and evaluate every cell expression
    once per row of the table instead of once per distinct combination (2x the scan's time on
    10 million rows, ``docs/benchmarks.md``).

    A table with a privacy unit is pinned by :func:`_bounded_sql` (``seed``: a secret).

    With clamped columns (rewriter.clamp) their cells are their clamped values' bins, and each
    row also carries ``sum(n * <product of shares>)`` (float8), one per non-empty set of the
    clamped columns, from which their value axes' masses are split (:func:`clamp.expand`)."""
    sch, name, every = _attributes(schema, table, attributes)
    decl = schema.tables[table]
    attrs, sums = _cells_and_sums(decl, every)
    if decl.unit is not None:
        return _bounded_sql(decl, attrs, seed, sums)
    cols = ", ".join(_q(a.name) for a in attrs)
    cells = ", ".join(f"({_cell(a)}) AS c{i}" for i, a in enumerate(attrs))
    if not attrs:
        return f"SELECT count(*)::int8 FROM {_q(sch)}.{_q(name)}"
    outer = ", ".join(f"coalesce(c{i}, -1)::int4" for i in range(len(attrs)))
    groups = ", ".join(str(i + 1) for i in range(len(attrs)))
    n = _fresh("n", attrs)
    inner = f"SELECT {cols}, count(*) AS {n} FROM {_q(sch)}.{_q(name)} GROUP BY {cols}"
    shares = "".join(f", {n} * ({f}) AS s{i}" for i, f in enumerate(sums))
    summed = "".join(f", sum(s{i})::float8" for i in range(len(sums)))
    return (
        f"SELECT {outer}, sum({n})::int8{summed} FROM (SELECT {cells}, {n}{shares} FROM ({inner})"
        f" AS g) AS cells GROUP BY {groups}"
    )


def _cells_and_sums(
    decl: TableDecl, every: Sequence[AttributeDecl]
) -> tuple[tuple[AttributeDecl, ...], list[str]]:
    """The attributes whose cells the pin statement computes (the declared ones), and the SQL
    of the shares it sums for the value axes among ``every`` (rewriter.clamp)."""
    attrs = tuple(a for a in every if not isinstance(a, ValueAxis))
    clamped = [decl.attributes[a.source] for a in every if isinstance(a, ValueAxis)]
    return attrs, clamp.factors(clamped, _q)


def _cell(a: AttributeDecl) -> str:
    """SQL of a row's cell of ``a`` (a clamped column's: its clamped value's bin)."""
    return clamp.cell_sql(a, _q(a.name)) if a.clamp else cell_expr(a)


def _fresh(name: str, attrs: Sequence[AttributeDecl]) -> str:
    """``name``, lengthened until no declared attribute has it."""
    while name in {a.name for a in attrs}:
        name += "_"
    return name


def _bounded_sql(
    decl: TableDecl, attrs: Sequence[AttributeDecl], seed: str, sums: Sequence[str] = ()
) -> str:
    """The pin of a table with a privacy unit: each unit's rows bounded on the backend.

    Mechanism (``dp.units``): rows whose unit is NULL, or that have no cell in the domain, are
    not counted. Of each unit's rows, at most ``per_cell`` in one cell are kept, then at most
    ``rows`` in all: the unit's cells are taken in the order of ``md5(seed, unit, cell)`` and
    each gives as many rows as are left. Which rows are kept depends only on that unit's own
    rows and on the secret ``seed`` (so adding or removing a unit changes no other unit's
    rows, and no analyst can aim a unit's rows at the kept ones).

    With ``unit_questions`` (the default), the statement returns one row per unit and cell
    instead: an index of the unit (``0 ..``, in the order of its identifier, which is not
    returned), the cell, all of the unit's rows there and the kept ones; the pin is the sum of
    the kept rows per cell, and each unit's rows (``dp.pin.UnitRows``) answer questions about
    units (``dp.per_unit``). One statement, one snapshot for both.

    A unit reached through a key (``[tables.T] privacy_unit = {column, table, key, unit}``):
    the table is pinned as its inner join with the mapping table's distinct ``(key, unit)``
    pairs. A row is one row *of each unit* its key maps to, bounded with that unit's other
    rows; a row whose key maps to no unit (or only to NULL) belongs to nobody and is not
    counted. A unit is then its mapping pairs and the rows they reach: removing it (its
    mapping rows, and the rows only it reaches) removes exactly its own bounded rows from the
    pin, whatever the other units' mapping rows are (docs/privacy.md §1a).

    ``sums``: the shares of clamped columns' values (rewriter.clamp), summed per unit and cell
    over all of the unit's rows there; the kept rows carry them in proportion (each kept row
    stands for the unit's average row of the cell: a value inside the bin).
    """
    unit = decl.unit
    if unit is None:
        raise ValueError("the table has no privacy unit")
    if len(seed) < 16:
        raise ValueError("a bounded pin needs a secret seed")
    bound = unit.contribution
    cols = ", ".join(f"t.{_q(a.name)}" for a in attrs)
    u, n = _fresh("u", attrs), _fresh("n", attrs)
    source = f"{_q(decl.schema)}.{_q(decl.name)} AS t"
    if unit.table is None:
        unit_expr = f"t.{_q(unit.column)}"
    else:
        sch, tab = unit.table.split(".")
        source += (
            f" JOIN (SELECT DISTINCT {_q(str(unit.key))} AS k, {_q(str(unit.unit))} AS v"
            f" FROM {_q(sch)}.{_q(tab)}) AS ref ON ref.k = t.{_q(unit.column)}"
        )
        unit_expr = "ref.v"
    inner = (
        f"SELECT {cols + ', ' if cols else ''}{unit_expr} AS {u}, count(*) AS {n} FROM {source}"
        f" WHERE {unit_expr} IS NOT NULL GROUP BY {cols + ', ' if cols else ''}{unit_expr}"
    )
    cells = "".join(f"({_cell(a)}) AS c{i}, " for i, a in enumerate(attrs))
    shares = "".join(f", {n} * ({f}) AS s{i}" for i, f in enumerate(sums))
    per_share = "".join(f", sum(s{i}) AS s{i}" for i in range(len(sums)))
    carried = "".join(f", s{i}" for i in range(len(sums)))
    names = [f"c{i}" for i in range(len(attrs))]
    inside = "".join(f" AND {c} IS NOT NULL" for c in names)
    by_cell = ", ".join([u, *names])
    key = " || ',' || ".join([f"{u}::text", *(f"{c}::text" for c in names)])
    order = ", ".join([f"md5({_lit(seed)} || {key})", *names])
    out = ", ".join(f"{c}::int4" for c in names)
    groups = ", ".join(names)
    kept = f"greatest(0, least(m, {bound.rows} - (sum(m) OVER w - m))) AS kept"
    per_cell = (
        f"SELECT {by_cell}, sum({n}) AS total, least(sum({n}), {bound.per_cell}) AS m"
        f"{per_share} FROM (SELECT {cells}{u}, {n}{shares} FROM ({inner}) AS g) AS cells"
        f" WHERE true{inside} GROUP BY {by_cell}"
    )
    window = f" WINDOW w AS (PARTITION BY {u} ORDER BY {order} ROWS UNBOUNDED PRECEDING)"
    if decl.unit_questions:  # each unit's rows too: one result row per unit and cell
        return (
            f"SELECT (dense_rank() OVER (ORDER BY {u}) - 1)::int4, {out + ', ' if out else ''}"
            f"total::int8, kept::int8{''.join(f', s{i}::float8' for i in range(len(sums)))}"
            f" FROM (SELECT {by_cell}, total, {kept}{carried} FROM ({per_cell})"
            f" AS per_cell{window}) AS bounded"
        )
    return (
        f"SELECT {out + ', ' if out else ''}sum(kept)::int8"
        f"{''.join(f', sum(kept * s{i} / total)::float8' for i in range(len(sums)))} FROM ("
        f"SELECT {groups + ', ' if groups else ''}total, {kept}{carried} FROM ({per_cell})"
        f" AS per_cell{window}) AS bounded WHERE kept > 0{' GROUP BY ' + groups if groups else ''}"
    )


def pin_domain(schema: Schema, table: str, attributes: Sequence[str] | None = None) -> Domain:
    """The domain a pin of ``table`` over ``attributes`` is over."""
    _, _, attrs = _attributes(schema, table, attributes)
    return Domain.of(*((a.name, a.size) for a in attrs))


def _shape(domain: Domain) -> tuple[int, int]:
    """The statement's cells per row (the declared attributes) and its sums of shares (for
    the value axes of clamped columns: rewriter.clamp)."""
    values = clamp.value_count(domain)
    return len(domain.attributes) - values, (1 << values) - 1


def pin_from_rows(domain: Domain, rows: Iterable[Sequence[float]]) -> Pin:
    """The pin from the statement's rows (cells, then the count, then any sums of shares)."""
    k, sums = _shape(domain)
    arr = np.asarray([tuple(r) for r in rows], dtype=np.float64).reshape(-1, k + 1 + sums)
    cells = [arr[:, j].astype(np.int64) for j in range(k)]
    if sums:
        return clamp.expand(domain, cells, arr[:, k], [arr[:, k + 1 + i] for i in range(sums)])
    return _pinned(domain, cells, arr[:, k].astype(np.int64))


def _pinned(domain: Domain, columns: Sequence[npt.ArrayLike], counts: npt.ArrayLike) -> Pin:
    """The pin of the statement's result, its rows with a ``-1`` (no cell) left out."""
    cols = [np.asarray(c) for c in columns]
    inside = np.ones(np.asarray(counts).shape[0], dtype=bool)
    for c in cols:
        inside &= c >= 0
    kept = tuple(c[inside].astype(np.int32) for c in cols)
    return Pin(domain, kept, np.asarray(counts, dtype=np.float64)[inside])


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00"


def pin_from_copy(domain: Domain, data: bytes | bytearray) -> Pin:
    """The pin from ``COPY (pin_sql) TO STDOUT (FORMAT binary)``: every field is a non-null
    int4 (an int8 for the counts, a float8 for a sum of shares of clamped columns), so the
    tuples are fixed-width and parsed in one pass, without copying the stream. A statement
    with each unit's rows (``k + 3`` fields: unit, cells, all rows, kept rows; then the sums)
    gives the pin with its :class:`dp.pin.UnitRows`."""
    k, sums = _shape(domain)
    view = memoryview(data)
    if bytes(view[: len(_COPY_HEADER)]) != _COPY_HEADER:
        raise ValueError("not a binary COPY stream")
    ext = int.from_bytes(view[15:19], "big")
    if len(view) < 21 + ext or bytes(view[-2:]) != b"\xff\xff":
        raise ValueError("the binary COPY stream is truncated")
    body = view[19 + ext : len(view) - 2]
    if len(body) >= 2 and int.from_bytes(body[:2], "big") == k + 3 + sums:
        return _units_from_copy(domain, body)
    fields = [("nf", ">i2")]
    for j in range(k):
        fields += [(f"l{j}", ">i4"), (f"c{j}", ">i4")]
    fields += [("ln", ">i4"), ("n", ">i8")]
    fields += [f for i in range(sums) for f in ((f"ls{i}", ">i4"), (f"s{i}", ">f8"))]
    rows = np.frombuffer(body, dtype=np.dtype(fields))
    if rows.size and (np.any(rows["nf"] != k + 1 + sums) or np.any(rows["ln"] != 8)):
        raise ValueError("unexpected tuples in the binary COPY stream")
    cells = [rows[f"c{j}"] for j in range(k)]
    if sums:
        return clamp.expand(domain, cells, rows["n"], [rows[f"s{i}"] for i in range(sums)])
    return _pinned(domain, cells, rows["n"])


def _units_from_copy(domain: Domain, body: memoryview) -> Pin:
    """The pin and each unit's rows from the tuples ``(unit, cells, total, kept[, sums])``
    (with sums of shares of clamped columns, the masses are split over the ends of their
    bins: rewriter.clamp)."""
    k, shares = _shape(domain)
    fields = [("nf", ">i2"), ("lu", ">i4"), ("u", ">i4")]
    for j in range(k):
        fields += [(f"l{j}", ">i4"), (f"c{j}", ">i4")]
    fields += [("lt", ">i4"), ("total", ">i8"), ("lk", ">i4"), ("kept", ">i8")]
    fields += [f for i in range(shares) for f in ((f"ls{i}", ">i4"), (f"s{i}", ">f8"))]
    rows = np.frombuffer(body, dtype=np.dtype(fields))
    if rows.size and (
        np.any(rows["nf"] != k + 3 + shares) or np.any(rows["lt"] != 8) or np.any(rows["lk"] != 8)
    ):
        raise ValueError("unexpected tuples in the binary COPY stream")
    if shares:
        return clamp.units_pin(
            domain,
            rows["u"].astype(np.int64),
            [rows[f"c{j}"].astype(np.int64) for j in range(k)],
            rows["total"].astype(np.float64),
            rows["kept"].astype(np.float64),
            [rows[f"s{i}"].astype(np.float64) for i in range(shares)],
        )
    cols = [rows[f"c{j}"].astype(np.int64) for j in range(k)]
    kept = rows["kept"].astype(np.float64)
    on = kept > 0
    if k:
        stacked = np.stack([c[on] for c in cols], axis=1)
        cells, inverse = np.unique(stacked, axis=0, return_inverse=True)
        sums = np.asarray(
            np.bincount(inverse.reshape(-1), weights=kept[on], minlength=cells.shape[0]),
            dtype=np.float64,
        )
        pin_cols = [cells[:, j] for j in range(k)]
    else:
        sums = np.asarray([kept.sum()] if rows.size else [], dtype=np.float64)
        pin_cols = []
    units = int(rows["u"].max()) + 1 if rows.size else 0
    each = UnitRows(
        units, rows["u"].astype(np.int32), tuple(cols), rows["total"].astype(np.float64)
    )
    return Pin(domain, tuple(pin_cols), sums, each)
