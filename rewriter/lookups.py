"""Joins of a protected table with public relations: a function over declared values.

Analysts join a protected table to small public relations: regions for countries, labels for
codes, weights, thresholds. Three kinds of relation are public:

- a ``VALUES`` list in the statement (``JOIN (VALUES ('Mexico', 'Latin America'), ...) AS
  r(country, region) ON a.native_country = r.country``);
- a CTE of ``VALUES`` or of constant rows (``WITH labels(code, label) AS (VALUES ...)``,
  ``WITH t AS (SELECT 50 AS lo UNION ALL SELECT 60)``);
- a table the configuration declares public (``[public_tables.NAME]``,
  :mod:`rewriter.public_tables`), whose rows the proxy reads once per epoch and passes in at
  binding (:func:`filled`).

**The mechanism.** A join multiplies each row of the protected table by the relation's rows
it meets: 0, 1 or several (PostgreSQL's semantics, also for a many-match). Each public
relation becomes one more axis of the statement's cells: its rows (the distinct rows of the
columns the statement reads, each with its multiplicity; one more, NULL row for a ``LEFT
JOIN``). Every expression, condition, grouping and aggregate is evaluated over the *declared*
values of the protected columns times the relation's rows, as any expression is
(:mod:`rewriter.reduce`); the join condition gives each (cell, relation row) pair its
multiplicity (:meth:`Joined.presence`: ``INNER``: the multiplicity where the condition holds;
``LEFT``: the same, and the NULL row where no row matches; ``EXISTS``/``IN (SELECT ...)``: 1
where some row matches, ``NOT EXISTS``/``NOT IN`` where none does); then the relation's axes
are summed out of every linear query (:meth:`Joined.contract`). What reaches the engine is a
batch over the protected table's own marginal, whose weight in a cell is what one row of that
cell adds to the answer: a row meeting ``k`` relation rows counts ``k`` times, and the batch's
sensitivity, recomputed by the engine from its columns, follows the largest multiplicity.

Guarantee: the relation's content is public (written in the statement, or declared public by
the operator, who vouches that it is not derived from protected rows: docs/privacy.md), so the
weights are a function of the statement, the declaration and public data only, and the
release is the engine's usual one (Gaussian or Laplace noise calibrated to the recomputed L2 /
L1 sensitivity of the batch, under the table's neighbouring relation).

Accepted shapes: the protected table (or a wrapper of it that :mod:`rewriter.derived` folds)
joined with ``JOIN``/``INNER JOIN``/``CROSS JOIN``/a comma (the condition in ``ON``, ``USING``
or ``WHERE``) or ``LEFT JOIN`` to one or more public relations, or a public relation ``RIGHT
JOIN``-ed to it; ``EXISTS``/``NOT EXISTS``/``IN``/``NOT IN`` subqueries over a public relation
as conditions of the ``WHERE`` (its conjuncts); inside derived tables too (Superset's virtual
datasets). Refused (0A000): ``FULL JOIN``, a public relation kept without a protected row
(``adult RIGHT JOIN r``), ``NATURAL JOIN``, parameters or expressions other than constants in
``VALUES``, a join inside a ``UNION`` branch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sqlglot import exp

from . import pgeval
from .errors import DomainTooLargeError, UnsupportedError
from .names import output_name
from .plan import (
    AttrRef,
    Compare,
    Const,
    Func,
    Logical,
    Lookup,
    Param,
    PExpr,
    PLogic,
    PostExpr,
    Pred,
    nodes,
    typed_const,
)
from .public_tables import PublicTableDecl
from .schema import AttributeDecl, Kind, Schema, TableDecl, ViewDecl

#: The function of the IR that reads a column of a public relation's row:
#: ``lookup_field(<the relation's axis>, <column index>, <column name>)``.
FIELD = "lookup_field"
#: How the axes of public relations are named among the attributes (never a SQL identifier).
AXIS_PREFIX = "#"


# --- what the statement joins (sqlglot level) ------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """A public relation a statement joins, as written: its name in the statement, how it is
    joined (``inner``, ``left``, ``semi``, ``anti``, ``notin``), the join condition (``ON``,
    or the subquery's ``WHERE``), ``USING`` columns, its column names, its rows (expressions
    of constants; None for a declared table), and for ``IN (SELECT col ...)`` the value
    compared with ``col``."""

    alias: str
    join: str
    on: exp.Expression | None = None
    using: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    rows: tuple[tuple[exp.Expression, ...], ...] | None = None
    table: PublicTableDecl | None = None
    distinct: bool = False
    member: tuple[exp.Expression, exp.Expression] | None = None  # IN: (value, column)


def _id(node: object) -> str:
    """PostgreSQL's folding of an identifier (unquoted: lower case)."""
    if isinstance(node, exp.Identifier):
        return str(node.this) if node.quoted else str(node.this).lower()
    if isinstance(node, str):
        return node.lower()
    return ""


def _alias(node: exp.Expression) -> tuple[str, tuple[str, ...]]:
    alias = node.args.get("alias")
    if not isinstance(alias, exp.TableAlias):
        return "", ()
    return _id(alias.this), tuple(_id(c) for c in alias.args.get("columns") or [])


def _constant_rows(
    body: exp.Expression,
) -> tuple[tuple[str, ...], list[tuple[exp.Expression, ...]], bool] | None:
    """The column names, rows and UNION-distinctness of a relation of constants: ``VALUES``,
    a ``SELECT`` of constants without ``FROM`` (sqlglot writes ``AS (VALUES ...)`` as ``SELECT *
    FROM (VALUES ...)``), or a ``UNION [ALL]`` of them; None for anything else."""
    if isinstance(body, exp.Subquery):
        return _constant_rows(body.this)
    if isinstance(body, exp.Values):
        rows = [
            tuple(t.expressions) if isinstance(t, exp.Tuple) else (t,) for t in body.expressions
        ]
        names = _alias(body)[1] or tuple(f"column{i + 1}" for i in range(len(rows[0])))
        return names, rows, False
    if isinstance(body, exp.Union):
        left, right = _constant_rows(body.this), _constant_rows(body.expression)
        if left is None or right is None or len(left[0]) != len(right[0]):
            return None
        if any(body.args.get(k) for k in ("order", "limit", "offset")):
            return None
        return left[0], left[1] + right[1], bool(body.args.get("distinct")) or left[2] or right[2]
    if not isinstance(body, exp.Select):
        return None
    if any(
        body.args.get(k)
        for k in ("where", "group", "having", "order", "limit", "offset", "joins", "with_")
    ):
        return None
    from_ = body.args.get("from_")
    if from_ is not None:
        inner = from_.this
        items = body.expressions
        if isinstance(inner, exp.Values) and len(items) == 1 and isinstance(items[0], exp.Star):
            return _constant_rows(inner)
        return None
    row = tuple(e.this if isinstance(e, exp.Alias) else e for e in body.expressions)
    if any(isinstance(n, exp.Column | exp.Star | exp.Query) for e in row for n in e.walk()):
        return None
    return tuple(output_name(e) for e in body.expressions), [row], False


def _with(select: exp.Select) -> exp.With | None:
    w = select.args.get("with_") or select.args.get("with")
    return w if isinstance(w, exp.With) else None


class _Extraction:
    """One pass over a statement: the public relations it joins, taken out of it."""

    def __init__(self, schema: Schema, table: Callable[[exp.Table], TableDecl | None]) -> None:
        self.schema = schema
        self.protected = table
        self.ctes: dict[str, tuple[tuple[str, ...], list[tuple[exp.Expression, ...]], bool]] = {}
        self.used: set[str] = set()
        self.found: list[Found] = []
        #: The statement's CTEs, by name.
        self.bodies: dict[str, exp.Expression] = {}
        #: Its CTEs that may be a SELECT of a public table (:meth:`public_select`), by name.
        self.selects: dict[str, exp.Expression] = {}

    def relation(
        self, node: exp.Expression
    ) -> (
        tuple[
            str,
            tuple[str, ...],
            list[tuple[exp.Expression, ...]] | None,
            bool,
            PublicTableDecl | None,
            exp.Expression | None,
        ]
        | None
    ):
        """(alias, names, rows, distinct, declared table, filter) when ``node`` (an item of a
        FROM list) is a public relation; None otherwise. ``filter`` is the ``WHERE`` of a
        ``SELECT`` of a declared public table's columns (a derived table or a CTE), written
        over the relation's alias: the rows the relation keeps."""
        alias, columns = _alias(node)
        if isinstance(node, exp.Values | exp.Subquery):
            got = _constant_rows(node)
            if got is None:
                if isinstance(node, exp.Subquery) and alias:
                    return self.public_select(node.this, alias, columns)
                return None
            names, rows, distinct = got
            return alias, columns or names, rows, distinct, None, None
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return None
        name = _id(node.this)
        db = node.args.get("db")
        if db is None and name in self.ctes:
            names, rows, distinct = self.ctes[name]
            self.used.add(name)
            return alias or name, columns or names, rows, distinct, None, None
        if db is None and name in self.selects:
            got_select = self.public_select(self.selects[name], alias or name, columns)
            if got_select is not None:
                self.used.add(name)
            return got_select
        decl = self.schema.public.get(name)
        if (
            decl is not None
            and (db is None or _id(db) == decl.schema)
            and not node.args.get("catalog")
        ):
            names = columns or tuple(c for c, _ in decl.columns)
            return alias or name, names, None, False, decl, None
        return None

    def public_select(
        self, body: exp.Expression, alias: str, columns: tuple[str, ...]
    ) -> tuple[str, tuple[str, ...], None, bool, PublicTableDecl, exp.Expression | None] | None:
        """A ``SELECT`` of columns of a declared public table with an optional ``WHERE`` (``WITH
        eu AS (SELECT country FROM country_region WHERE region = 'Europe')``) as that table
        under ``alias``: its columns renamed as the SELECT names them (the others hidden), and
        its ``WHERE`` as the filter of its rows; None for any other body."""
        if not isinstance(body, exp.Select) or any(
            body.args.get(k)
            for k in ("joins", "group", "having", "order", "limit", "offset", "with_", "distinct")
        ):
            return None
        from_ = body.args.get("from_")
        if from_ is None or not isinstance(from_.this, exp.Table):
            return None
        inner = self.relation(from_.this)
        if inner is None or inner[4] is None or inner[5] is not None:
            return None
        inner_alias, table_names, _, _, decl, _ = inner
        if decl is None:  # pragma: no cover - checked above
            return None
        outputs: dict[str, str] = {}  # column of the table -> its name in the SELECT
        for item in body.expressions:
            if isinstance(item, exp.Star):
                outputs.update({c: c for c in table_names if c not in outputs})
                continue
            col = item.this if isinstance(item, exp.Alias) else item
            if not isinstance(col, exp.Column) or col.table not in ("", inner_alias):
                return None
            source = _id(col.this)
            if source not in table_names or source in outputs:
                return None
            outputs[source] = (
                _id(item.args["alias"].this) if isinstance(item, exp.Alias) else source
            )
        shown = list(outputs.values())
        if columns:
            if len(columns) > len(shown):
                return None
            renamed = dict(zip(shown, columns, strict=False))
            outputs = {c: renamed.get(o, o) for c, o in outputs.items()}
            shown = list(outputs.values())
        if len(set(shown)) != len(shown):
            return None
        names = tuple(outputs.get(c, f"{AXIS_PREFIX}hidden {c}") for c in table_names)
        where = body.args.get("where")
        filter_: exp.Expression | None = None
        if where is not None:
            filter_ = where.this.copy()
            if any(isinstance(n, exp.Query | exp.Star) for n in filter_.walk()):
                return None
            for col in list(filter_.find_all(exp.Column)):
                source = _id(col.this)
                if col.table not in ("", inner_alias) or source not in table_names:
                    return None
                col.replace(exp.column(names[table_names.index(source)], table=alias, quoted=True))
        return alias, names, None, False, decl, filter_

    def add(self, item: exp.Expression, join: str, on: exp.Expression | None,
            using: tuple[str, ...]) -> bool:  # fmt: skip
        rel = self.relation(item)
        if rel is None:
            return False
        alias, names, rows, distinct, decl, filter_ = rel
        if filter_ is not None:
            on = (
                filter_
                if on is None
                else cast(exp.Expression, exp.and_(exp.paren(on.copy()), filter_))
            )
        self.found.append(
            Found(
                alias=alias,
                join=join,
                on=on.copy() if on is not None else None,
                using=using,
                names=names,
                rows=None if rows is None else tuple(tuple(e.copy() for e in r) for r in rows),
                table=decl,
                distinct=distinct,
            )
        )
        return True

    def strip(self, select: exp.Select, depth: int = 0) -> None:
        """Take the public relations out of ``select`` (in place), and out of the derived
        table or CTE it reads."""
        if depth > 16:
            return
        inner_with = _with(select) if depth else None
        if inner_with is not None:  # a derived table's own CTEs (dbt's test wrappers)
            self.register(inner_with)
        self._joins(select)
        self._semi(select)
        from_ = select.args.get("from_")
        src = from_.this if from_ is not None else None
        if isinstance(src, exp.Subquery) and isinstance(src.this, exp.Select):
            self.strip(src.this, depth + 1)
        with_ = _with(select)
        if isinstance(src, exp.Table) and with_ is not None:
            name = _id(src.this)
            for cte in with_.expressions:
                if _alias(cte)[0] == name and isinstance(cte.this, exp.Select):
                    self.strip(cte.this, depth + 1)
        if inner_with is not None:
            self.prune(select)

    def register(self, with_: exp.With) -> None:
        """The CTEs of ``with_``: constant ones as relations, the others' bodies by name."""
        if with_.args.get("recursive"):
            return
        for cte in with_.expressions:
            got = _constant_rows(cte.this)
            name, columns = _alias(cte)
            self.bodies[name] = cte.this
            if got is not None and name:
                self.ctes[name] = (columns or got[0], got[1], got[2])
            elif name and not columns:
                self.selects[name] = cte.this

    def prune(self, select: exp.Select) -> None:
        """``select`` without the CTEs taken out as public relations."""
        with_ = _with(select)
        if with_ is None or not self.used:
            return
        rest = [c for c in with_.expressions if _alias(c)[0] not in self.used]
        select.set("with_", exp.With(expressions=rest) if rest else None)
        select.set("with", None)

    def _joins(self, select: exp.Select) -> None:
        joins = list(select.args.get("joins") or [])
        from_ = select.args.get("from_")
        if not joins or from_ is None:
            return
        items: list[exp.Expression] = [from_.this, *(j.this for j in joins)]
        public = [self.relation(i) is not None for i in items]
        if not any(public):
            return
        others = [i for i, p in enumerate(public) if not p]
        if len(others) != 1 or others[0] > 1 or not self.rows_of(items[others[0]], select):
            # several relations that are not public, or a join after the aggregation (an
            # aggregate joined to a lookup): not a join of rows with a public relation
            return
        p = others[0]
        for j in joins:
            if j.args.get("method") or j.args.get("side") == "FULL":
                raise UnsupportedError(
                    f"{'NATURAL' if j.args.get('method') else 'FULL'} JOIN with a protected table",
                    hint="write JOIN ... ON, JOIN ... USING or LEFT JOIN",
                )
        kept: list[exp.Join] = []
        if p == 1:
            first = joins[0]
            side = first.args.get("side")
            if side == "LEFT":
                raise UnsupportedError(
                    "a LEFT JOIN that keeps the rows of a public relation without a row of the "
                    "protected table",
                    hint="write FROM <protected table> LEFT JOIN <relation> ON ...",
                )
            self.add(
                items[0],
                "left" if side == "RIGHT" else "inner",
                first.args.get("on"),
                tuple(_id(u) for u in first.args.get("using") or []),
            )
            select.set("from_", exp.From(this=first.this.copy()))
            rest = joins[1:]
        else:
            rest = joins
        for j in rest:
            side = j.args.get("side")
            if side == "RIGHT":
                raise UnsupportedError(
                    "a RIGHT JOIN that keeps the rows of a public relation without a row of "
                    "the protected table",
                    hint="write <protected table> LEFT JOIN <relation>, or JOIN",
                )
            using = tuple(_id(u) for u in j.args.get("using") or [])
            if not self.add(j.this, "left" if side == "LEFT" else "inner", j.args.get("on"), using):
                kept.append(j)  # pragma: no cover - every other item is public here
        select.set("joins", kept or None)

    def rows_of(self, node: exp.Expression, select: exp.Select) -> bool:
        """Whether ``node`` (the one item of a FROM list that is not public) holds rows of
        the protected table: the table itself, or a derived table or CTE that is not an
        aggregate (an aggregate joined to a public relation is a composition)."""
        body: exp.Expression | None = None
        if isinstance(node, exp.Subquery):
            body = node.this
        elif isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            if self.protected(node) is not None:
                return True
            if node.args.get("db") is None:
                body = self.bodies.get(_id(node.this))
        if not isinstance(body, exp.Select):
            return False
        if body.args.get("group") is not None or body.args.get("distinct") is not None:
            return False
        return not any(isinstance(n, exp.AggFunc | exp.Window) for n in body.walk())

    def _semi(self, select: exp.Select) -> None:
        """``EXISTS``/``IN`` subqueries over a public relation among the WHERE's conjuncts."""
        where = select.args.get("where")
        if where is None:
            return
        conjuncts: list[exp.Expression] = []

        def split(e: exp.Expression) -> None:
            if isinstance(e, exp.And):
                split(e.this)
                split(e.expression)
            elif isinstance(e, exp.Paren) and isinstance(e.this, exp.And):
                split(e.this)
            else:
                conjuncts.append(e)

        split(where.this)
        changed = False
        out: list[exp.Expression] = []
        for c in conjuncts:
            if self._semi_one(c):
                changed = True
            else:
                out.append(c)
        if not changed:
            return
        if not out:
            select.set("where", None)
            return
        select.set("where", exp.Where(this=exp.and_(*out)))

    def _semi_one(self, c: exp.Expression) -> bool:
        negated = False
        node = c.this if isinstance(c, exp.Paren) else c
        if isinstance(node, exp.Not):
            negated, node = True, node.this
            node = node.this if isinstance(node, exp.Paren) else node
        if isinstance(node, exp.Exists):
            sub = node.this
            member = None
        elif isinstance(node, exp.In) and isinstance(node.args.get("query"), exp.Subquery):
            sub = node.args["query"].this
            member = node.this
        elif (
            isinstance(node, exp.In)
            and len(node.expressions) == 1
            and isinstance(node.expressions[0], exp.Values)
            and not isinstance(node.this, exp.Tuple)
        ):
            # x IN (VALUES (a), (b)): a semi-join to the list's one column
            alias = f"{AXIS_PREFIX}in {len(self.found)}"
            values = node.expressions[0].copy()
            values.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
            got = _constant_rows(values)
            if got is None or len(got[0]) != 1:
                return False
            self.add(values, "notin" if negated else "semi", None, ())
            column = exp.column(got[0][0], table=alias, quoted=True)
            self.found[-1] = dataclasses.replace(self.found[-1], member=(node.this.copy(), column))
            return True
        else:
            return False
        if not isinstance(sub, exp.Select):
            return False
        if any(
            sub.args.get(k)
            for k in ("joins", "group", "having", "limit", "offset", "with_", "distinct")
        ):
            return False
        from_ = sub.args.get("from_")
        if from_ is None or self.relation(from_.this) is None:
            return False
        on = sub.args["where"].this if sub.args.get("where") is not None else None
        pair = None
        if member is not None:
            if len(sub.expressions) != 1:
                return False
            pair = (member.copy(), _unaliased(sub.expressions[0]).copy())
        kind = (
            ("notin" if negated else "semi")
            if member is not None
            else ("anti" if negated else "semi")
        )
        self.add(from_.this, kind, on, ())
        if pair is not None:
            self.found[-1] = dataclasses.replace(self.found[-1], member=pair)
        return True


def _unaliased(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def extract(
    select: exp.Select, schema: Schema, protected: Callable[[exp.Table], TableDecl | None]
) -> tuple[exp.Select, tuple[Found, ...]] | None:
    """``select`` without the public relations it joins (a copy), and those relations; None
    when it joins none. ``protected`` names the protected table of a table reference."""
    if not any(isinstance(n, exp.Join | exp.Exists | exp.In) for n in select.walk()):
        return None
    ex = _Extraction(schema, protected)
    copy = select.copy()
    with_ = _with(copy)
    if with_ is not None:
        ex.register(with_)
    ex.strip(copy)
    if not ex.found:
        return None
    aliases = [f.alias for f in ex.found]
    if len(set(aliases)) != len(aliases) or any(not a for a in aliases):
        raise UnsupportedError(
            "two public relations of one statement with the same name",
            hint="give each VALUES list and public table its own alias",
        )
    ex.prune(copy)
    return copy, tuple(ex.found)


# --- the normalised relations (sqlglot-free) ---------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LookupAxis(AttributeDecl):
    """The axis of a public relation among a statement's cells: one cell per distinct row of
    the columns the statement reads (``values``: the rows, as tuples), each standing for
    ``weights`` identical rows; ``nullable``: the NULL row of a ``LEFT JOIN``."""

    weights: tuple[int, ...] = ()


def quoted(name: str) -> str:
    """An identifier as SQL writes it: bare when PostgreSQL would fold it to itself."""
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def field_ref(lookup: Lookup, column: str) -> PostExpr:
    """The IR of ``alias.column``: the column of the relation's row in a cell."""
    k = lookup.columns.index(column)
    return Func(
        name=FIELD,
        args=(
            AttrRef(name=lookup.axis, pg_type="record"),
            Const(value=k, pg_type="int4"),
            Const(value=f"{quoted(lookup.alias)}.{quoted(column)}", pg_type="text"),
        ),
        pg_type=lookup.types[k],
    )


def field_value(row: object, index: object) -> object:
    """The value of ``lookup_field``: column ``index`` of ``row`` (NULL for the NULL row)."""
    if row is None:
        return None
    assert isinstance(row, tuple) and isinstance(index, int)
    return row[index]


def used_columns(logical: Logical, axis: str) -> list[int]:
    """The columns of relation ``axis`` the statement reads."""
    parts = (
        logical.outputs,
        logical.where,
        logical.group_by,
        logical.measures,
        logical.having,
        logical.order_by,
        logical.lookups,
    )
    used: set[int] = set()
    for n in nodes(parts):
        if isinstance(n, Func) and n.name == FIELD and isinstance(n.args[0], AttrRef):
            k = n.args[1]
            if n.args[0].name == axis and isinstance(k, Const) and isinstance(k.value, int):
                used.add(k.value)
    return sorted(used)


def axis_of(lookup: Lookup, rows: Sequence[tuple[object, ...]], used: Sequence[int]) -> LookupAxis:
    """The axis of ``lookup`` over ``rows``: their distinct rows of the ``used`` columns (the
    others NULL), each with its multiplicity; a NULL row for a LEFT JOIN."""
    counts: dict[tuple[object, ...], int] = {}
    kept: dict[tuple[object, ...], tuple[object, ...]] = {}
    for row in rows:
        proj = tuple(row[k] if k in used else None for k in range(len(lookup.columns)))
        key = tuple((type(v).__name__, v) for v in proj)  # 1 and 1.0 and True stay apart
        kept.setdefault(key, proj)
        counts[key] = counts.get(key, 0) + 1
    return LookupAxis(
        name=lookup.axis,
        kind=Kind.CATEGORICAL,
        pg_type="record",
        nullable=lookup.join == "left",
        values=cast(tuple[str, ...], tuple(kept.values())),
        weights=tuple(counts.values()),
    )


def with_axes(table: TableDecl, axes: Sequence[LookupAxis]) -> TableDecl:
    """``table`` with the axes of its statement's public relations among its attributes (after
    the declared ones)."""
    attrs = {k: v for k, v in table.attributes.items() if not k.startswith(AXIS_PREFIX)}
    attrs.update({a.name: a for a in axes})
    return dataclasses.replace(table, attributes=attrs)


def pending(logical: Logical) -> tuple[str, ...]:
    """The declared public tables whose rows ``logical`` still needs (:func:`filled`)."""
    return tuple(sorted({lk.table for lk in logical.lookups if lk.rows is None and lk.table}))


def filled(logical: Logical, public: Mapping[str, Sequence[tuple[object, ...]]]) -> Logical:
    """``logical`` with the rows of its declared public tables (``public``: by qualified name,
    each row the table's declared columns, typed), ready to reduce."""
    lookups = []
    axes = []
    for lk in logical.lookups:
        if lk.rows is None:
            got = public.get(lk.table or "")
            if got is None:
                raise UnsupportedError(f"the rows of public table {lk.table} are not known")
            lk = dataclasses.replace(lk, rows=tuple(tuple(r) for r in got))
        lookups.append(lk)
    done = dataclasses.replace(logical, lookups=tuple(lookups))
    for lk in lookups:
        assert lk.rows is not None
        axes.append(axis_of(lk, lk.rows, used_columns(done, lk.axis)))
    return dataclasses.replace(done, table=with_axes(logical.table, axes))


# --- reduction over the joined cells -------------------------------------------------------


class Joined:
    """A statement's cells joined with its public relations: the marginal of the protected
    columns it uses times one axis per relation (``view``), the multiplicity of each (cell,
    rows) combination (:meth:`presence`), and the summing out of the relations' axes
    (:meth:`contract`)."""

    def __init__(self, logical: Logical, base: ViewDecl) -> None:
        table = logical.table
        self.logical = logical
        self.base = base
        self.axes = [cast(LookupAxis, table.attributes[lk.axis]) for lk in logical.lookups]
        self.view = ViewDecl(name=base.name, attributes=base.attributes + tuple(self.axes))
        if self.view.size > table.cell_limit:
            raise DomainTooLargeError(
                f"the columns {', '.join(base.names)} of protected table {table.name} joined "
                f"with {', '.join(lk.alias for lk in logical.lookups)} span {self.view.size:,} "
                f"cells, above the cell limit ({table.cell_limit:,})",
                hint="join fewer or smaller public relations, or read fewer of their columns",
            )
        self.span = 1
        for a in self.axes:
            self.span *= a.size
        self._presence: npt.NDArray[np.float64] | None = None

    def presence(self, pred: Callable[[Pred], tuple[Any, Any, Any]]) -> npt.NDArray[np.float64]:
        """Per combination of the view's cells (an array broadcastable to its shape), how many
        times the join holds it: the product, relation by relation in join order, of
        ``inner``: the row's multiplicity (its condition is in the WHERE); ``left``: the
        multiplicity where the condition is true, and on the NULL row 1 where it is true for no
        row; ``semi``/``anti``: 1 on the relation's first row where the condition is true for
        some / no row (0 elsewhere, so summing the axis out counts the protected row once);
        ``notin``: 1 on the first row where, for every row the subquery's condition keeps,
        the comparison is false. ``pred`` gives a condition's (true, false, mixed) masks."""
        if self._presence is not None:
            return self._presence
        ndim = len(self.view.attributes)
        out = np.ones([1] * ndim)
        base = len(self.base.attributes)
        for i, (lk, axis) in enumerate(zip(self.logical.lookups, self.axes, strict=True)):
            k = base + i
            m = len(axis.weights)
            shape = [1] * ndim
            shape[k] = axis.size
            real = np.zeros(axis.size, dtype=bool)
            real[:m] = True
            mult = np.ones(axis.size)
            mult[:m] = axis.weights
            real_b, mult_b = real.reshape(shape), mult.reshape(shape)
            first = np.zeros(axis.size)
            if axis.size:
                first[0] = 1.0
            first_b = first.reshape(shape)
            if lk.join == "inner":
                out = out * mult_b
                continue
            t = _mask(pred, lk.on, ndim)
            if lk.join == "left":
                hit = t & real_b
                none = ~np.any(hit, axis=k, keepdims=True)
                out = out * np.where(real_b, hit * mult_b, none)
            elif lk.join in ("semi", "anti"):
                some = np.any(t & real_b, axis=k, keepdims=True)
                out = out * first_b * (some if lk.join == "semi" else ~some)
            else:  # notin: no kept row whose comparison is true or NULL
                assert lk.member is not None
                _, eq_f, _ = pred(lk.member)
                blocking = t & real_b & ~_padded(np.asarray(eq_f, dtype=bool), ndim)
                out = out * first_b * ~np.any(blocking, axis=k, keepdims=True)
        self._presence = np.asarray(out, dtype=np.float64)
        return self._presence

    def contract(self, matrix: sp.csr_array) -> sp.csr_array:
        """``matrix`` (over the view's cells) with the relations' axes summed out: over the
        protected marginal's cells (the axes are the last ones, so cell ``c * span + j`` of
        the view is cell ``c`` of the marginal)."""
        m = sp.csr_array(
            (matrix.data, matrix.indices // self.span, matrix.indptr),
            shape=(matrix.shape[0], self.base.size),
        )
        m.sum_duplicates()
        return m


def _padded(a: npt.NDArray[Any], ndim: int) -> npt.NDArray[Any]:
    return a.reshape((1,) * (ndim - a.ndim) + a.shape)


def _mask(
    pred: Callable[[Pred], tuple[Any, Any, Any]], p: Pred | None, ndim: int
) -> npt.NDArray[np.bool_]:
    if p is None:
        return np.ones([1] * ndim, dtype=bool)
    t, _, _ = pred(p)
    return _padded(np.asarray(t, dtype=bool), ndim)


def joined(logical: Logical, base: ViewDecl) -> Joined:
    """The joined cells of a statement with public relations (their rows known)."""
    if pending(logical):
        raise UnsupportedError(
            "the rows of public table " + ", ".join(pending(logical)) + " are not known yet"
        )
    return Joined(logical, base)


# --- normalisation ---------------------------------------------------------------------------


class Resolver:
    """Resolves the names of public relations while a statement is normalised: qualified
    (``r.region``, ``"Country Region"."region"``) and unqualified (a column only one relation
    has; a ``USING`` column is the protected table's)."""

    def __init__(self, table: TableDecl, lookups: Sequence[Lookup], using: set[str]) -> None:
        self.table = table
        self.by_alias = {lk.alias: lk for lk in lookups}
        self.lookups = list(lookups)
        self.using = using
        #: The relation of the EXISTS / IN subquery being read: its columns come first.
        self.inside: Lookup | None = None

    def field(self, node: exp.Column) -> PostExpr | None:
        """The IR of a column of a public relation, None for a column of the protected table;
        a name no relation (nor the table) has, or several have, is an error as in
        PostgreSQL."""
        if isinstance(node.this, exp.Star):
            return None
        name = _id(node.this) if isinstance(node.this, exp.Identifier) else node.name.lower()
        qual = node.args.get("table")
        if qual is not None:
            lk = self.by_alias.get(_id(qual))
            if lk is None or node.args.get("db") is not None:
                return None
            if name not in lk.columns:
                from .errors import UndefinedColumnError

                raise UndefinedColumnError(f"column {lk.alias}.{name} does not exist")
            return field_ref(lk, name)
        if self.inside is not None and name in self.inside.columns:
            return field_ref(self.inside, name)
        if name in self.using:
            return None
        owners = [lk for lk in self.lookups if name in lk.columns and lk.join in ("inner", "left")]
        if not owners:
            return None
        if len(owners) > 1 or self.table.column_type(name) is not None:
            err = UnsupportedError(f'column reference "{name}" is ambiguous')
            err.sqlstate = "42702"  # type: ignore[misc]
            raise err
        return field_ref(owners[0], name)


def axis_name(i: int) -> str:
    return f"{AXIS_PREFIX}{i + 1}"


def column_types(
    found: Found,
    literal: Callable[[exp.Expression], Any],
    common: Callable[[list[str]], str],
    cast_to: Callable[[Any, str], Any],
) -> tuple[tuple[str, ...], tuple[tuple[object, ...], ...] | None]:
    """The types of a relation's columns and its typed rows (None for a declared table): a
    ``VALUES`` column takes the common type of its values, as PostgreSQL resolves it (strings
    alone are text; an untyped string next to numbers is read as a number)."""
    if found.table is not None:
        return tuple(t for _, t in found.table.columns), None
    assert found.rows is not None
    width = len(found.names)
    consts: list[list[Any]] = []
    for row in found.rows:
        if len(row) != width:
            err = UnsupportedError("VALUES lists must all be the same length")
            err.sqlstate = "42601"  # type: ignore[misc]
            raise err
        consts.append([literal(e) for e in row])
    types = tuple(common([c[j].pg_type for c in consts]) for j in range(width))
    rows = tuple(tuple(cast_to(c[j], types[j]) for j in range(width)) for c in consts)
    if found.distinct:
        rows = tuple(dict.fromkeys(rows))
    return types, rows


def template_sql(lk: Lookup, rows_sql: Callable[[object, str], str]) -> str:
    """How a template writes a relation: its table, or its VALUES list."""
    cols = ", ".join(quoted(c) for c in lk.columns)
    if lk.table is not None:
        return f"{lk.table} AS {quoted(lk.alias)}"
    assert lk.rows is not None
    body = ", ".join(
        "(" + ", ".join(rows_sql(v, t) for v, t in zip(r, lk.types, strict=True)) + ")"
        for r in lk.rows
    )
    return f"(VALUES {body}) AS {quoted(lk.alias)} ({cols})"


def joins_sql(lookups: Sequence[Lookup], pred_sql: Callable[[Pred], str]) -> str:
    """The FROM clause's joins of a template (inner conditions are in its WHERE)."""
    out = []
    for lk in lookups:
        if lk.join == "inner":
            out.append(f" CROSS JOIN {lk.sql}")
        elif lk.join == "left":
            on = pred_sql(lk.on) if lk.on is not None else "TRUE"
            out.append(f" LEFT JOIN {lk.sql} ON {on}")
    return "".join(out)


def semi_sql(
    lk: Lookup, pred_sql: Callable[[Pred], str], expr_sql: Callable[[PostExpr], str]
) -> str:
    """A template's condition for an EXISTS / IN subquery over a public relation."""
    where = f" WHERE {pred_sql(lk.on)}" if lk.on is not None else ""
    if lk.join == "notin":
        assert isinstance(lk.member, PExpr) and isinstance(lk.member.expr, Compare)
        cmp = lk.member.expr
        return f"{expr_sql(cmp.left)} NOT IN (SELECT {expr_sql(cmp.right)} FROM {lk.sql}{where})"
    return f"{'NOT ' if lk.join == 'anti' else ''}EXISTS (SELECT 1 FROM {lk.sql}{where})"


class Begun:
    """The public relations of a statement being normalised: their :class:`Lookup` (join
    conditions converted), the inner joins' conditions for the WHERE, and the template's
    joins."""

    def __init__(self, lookups: Sequence[Lookup], inner: Sequence[Pred]) -> None:
        self.lookups = tuple(lookups)
        self.inner = tuple(inner)

    def where(self, where: Pred | None) -> Pred | None:
        """The statement's WHERE with the inner joins' conditions (an inner join's ``ON``
        is a condition on the joined rows, as its WHERE is)."""

        parts = [*self.inner, *([where] if where is not None else [])]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else PLogic("and", tuple(parts))

    def sql(
        self, pred_sql: Callable[[Pred], str], expr_sql: Callable[[PostExpr], str]
    ) -> tuple[str, str]:
        """A template's joins (after FROM) and the conditions of its semi-joins (for WHERE)."""
        semis = [
            semi_sql(lk, pred_sql, expr_sql)
            for lk in self.lookups
            if lk.join not in ("inner", "left")
        ]
        return joins_sql(self.lookups, pred_sql), " AND ".join(semis)


def begin(b: Any, found: Sequence[Found]) -> Begun:
    """Set up the builder ``b`` of :func:`rewriter.normalise.normalise` for the public
    relations ``found``: their columns' types and typed rows, their axes among the table's
    attributes (``b.table``), the resolution of their names (``b.resolver``), and their join
    conditions converted to the IR."""
    table: TableDecl = b.table

    def literal(e: exp.Expression) -> Const:
        if not b.is_value(e):
            raise UnsupportedError(
                "an expression that is not a constant in a VALUES list or a CTE of constants "
                f"joined to protected table {table.name}",
                hint="write the public relation's values as constants",
            )
        c = b.literal(e)
        if isinstance(c.value, Param):
            raise UnsupportedError(
                f"a parameter in a public relation joined to protected table {table.name}",
                hint="write the public relation's values as constants",
            )
        assert isinstance(c, Const)
        return c

    def typed(c: Const, t: str) -> object:
        if c.value is None:
            return None
        if c.pg_type == t:
            return c.value
        try:
            v = (
                typed_const(c.value, t).value
                if c.pg_type in ("unknown", "")
                else pgeval.cast(c.value, c.pg_type, t)
            )
        except pgeval.TypeMismatch as e:
            raise UnsupportedError(e.message) from None
        return v

    lookups: list[Lookup] = []
    for i, f in enumerate(found):
        types, rows = column_types(f, literal, lambda ts: pgeval.common_type(ts, "VALUES"), typed)
        lk = Lookup(
            alias=f.alias,
            axis=axis_name(i),
            join=f.join,
            columns=f.names,
            types=types,
            rows=rows,
            table=f.table.qualified if f.table is not None else None,
        )
        lookups.append(dataclasses.replace(lk, sql=template_sql(lk, pgeval.literal_sql)))
    axes = [axis_of(lk, lk.rows or (), range(len(lk.columns))) for lk in lookups]
    b.table = with_axes(table, axes)
    using = {u for f in found for u in f.using}
    b.resolver = Resolver(table, lookups, using)
    inner: list[Pred] = []
    for i, f in enumerate(found):
        lk = lookups[i]
        conds: list[Pred] = []
        b.resolver.inside = lk if f.join not in ("inner", "left") else None
        for u in f.using:
            if u not in lk.columns:
                raise UnsupportedError(
                    f'column "{u}" specified in USING clause does not exist in {lk.alias}'
                )
            if table.column_type(u) is not None:
                left: PostExpr = b.cell(exp.column(exp.to_identifier(u, quoted=True)))
            else:
                earlier = [x for x in lookups[:i] if u in x.columns]
                if not earlier:
                    raise UnsupportedError(
                        f'column "{u}" specified in USING clause does not exist in left table'
                    )
                left = field_ref(earlier[0], u)
            conds.append(PExpr(b.compare("=", left, field_ref(lk, u))))
        if f.on is not None:
            conds.append(b.pred(f.on))
        on: Pred | None = None
        if conds:
            on = conds[0] if len(conds) == 1 else PLogic("and", tuple(conds))
        member: Pred | None = None
        if f.member is not None:
            value, col = f.member
            b.resolver.inside = None
            left_value = b.cell(value)
            b.resolver.inside = lk
            member = PExpr(b.compare("=", left_value, b.cell(col)))
        b.resolver.inside = None
        if f.join == "inner":
            if on is not None:
                inner.append(on)
            on = None
        elif f.join == "semi" and member is not None:
            on = member if on is None else PLogic("and", (member, on))
            member = None
        lookups[i] = dataclasses.replace(lk, on=on, member=member)
    b.resolver.lookups = list(lookups)
    b.resolver.by_alias = {lk.alias: lk for lk in lookups}
    return Begun(lookups, inner)


def finish(logical: Logical) -> Logical:
    """A normalised statement with public relations: the axes of its relations made of the
    distinct rows of the columns it reads (when their rows are known)."""
    if pending(logical):
        return logical
    return filled(logical, {})


def cells(axis: LookupAxis) -> list[list[object]]:
    """Per cell of a relation's axis, its one value (a row)."""
    out: list[list[object]] = [[v] for v in axis.values]
    if axis.nullable:
        out.append([None])
    return out


def product_size(axes: Sequence[LookupAxis]) -> int:
    return int(np.prod([a.size for a in axes])) if axes else 1


__all__ = [
    "FIELD",
    "Begun",
    "Found",
    "Joined",
    "Lookup",
    "LookupAxis",
    "Resolver",
    "axis_name",
    "axis_of",
    "begin",
    "cells",
    "column_types",
    "extract",
    "field_ref",
    "field_value",
    "filled",
    "finish",
    "joined",
    "joins_sql",
    "pending",
    "product_size",
    "semi_sql",
    "template_sql",
    "used_columns",
    "with_axes",
]
