"""Questions about units: statements over the per-unit relation of a user-level table.

A table whose privacy unit is one of its columns (``[tables.T] privacy_unit = "user_id"``) is
also asked about its *units*: how many there are, and how a per-unit value is distributed::

    SELECT count(DISTINCT user_id) FROM checkins WHERE lat >= 40
    SELECT hour, count(DISTINCT user_id) FROM checkins GROUP BY hour
    SELECT width_bucket(n, 0, 50, 5), count(*)
      FROM (SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t GROUP BY 1
    SELECT avg(n) FROM (SELECT user_id, count(*) n FROM checkins GROUP BY user_id) t

The inner query, ``SELECT unit, g..., agg... FROM T WHERE w GROUP BY unit, g... HAVING h``
(or the statement itself with ``count(DISTINCT unit)``), defines a derived relation ``D`` with
one row per unit and group: its columns are the attributes the group expressions ``g`` read
(each group placed at the first of its cells) and one integer attribute per aggregate, over a
public range, the value clamped into it (``dp.per_unit``: counts ``0 .. k`` with ``k`` the
table's ``max_rows_per_unit``; ``sum`` ``k`` times its column's range; ``min``/``max`` its
column's values; ``count(DISTINCT)`` the number of its column's values). The inner query is
reduced as any statement over ``T`` is (its groups, FILTERs, expressions, all over public
values), and read back as a :class:`dp.per_unit.UnitQuestion`. The inner query is then
replaced by a plain projection of ``D`` (each aggregate a column of ``D``, HAVING its
WHERE), and the whole statement is folded and reduced over ``D`` by the ordinary passes
(``rewriter.derived``, ``normalise``, ``reduce``): a histogram over units, at the
sensitivity of one unit (``dp.per_unit``).

What is refused, with the reason: the inner query's own result (one row per unit), a per-unit
value that is not an integer (``avg``, a sum of non-integers, a date's min), a unit reached
through a key (its units are not the key's values), parameters inside the inner query,
``count(DISTINCT unit)`` beside other aggregates (two releases: one statement each), ROLLUP and
grouping sets with ``count(DISTINCT unit)``, LIMIT inside the inner query.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from sqlglot import exp

from dp.domain import Domain
from dp.per_unit import UnitAggregate, UnitQuestion, UnitsDomain

from .derived import _derived
from .errors import RowAccessError, UnsupportedError, units_hint
from .names import ident, output_name, unalias
from .normalise import Logical, _attrs_of, _int_literal, normalise
from .plan import AggRef, Plan
from .reduce import reduce
from .schema import AttributeDecl, DateUnit, Kind, Schema, TableDecl, ViewDecl

#: The columns of ``D`` that hold the per-unit aggregates (never shown: outputs keep the
#: statement's own names).
AGG_PREFIX = "__lapras_unit_agg_"
_INT_TYPES = ("int2", "int4", "int8")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitsTable(TableDecl):
    """The derived relation ``D`` of a question about units, as a table the ordinary passes
    reduce over: its marginals are :class:`dp.per_unit.UnitsDomain`, and only the cells of
    its group part that hold a group are selectable (the others never hold a row)."""

    question: UnitQuestion
    group_names: tuple[str, ...]
    #: The per-unit query it derives from, as SQL (for the statement's template).
    source: str = ""

    def positions(self, view: ViewDecl) -> tuple[int, ...]:
        order = list(self.attributes)
        return tuple(order.index(a.name) for a in view.attributes)

    def marginal_domain(self, view: ViewDecl) -> Domain:
        return UnitsDomain.over(
            self.question, tuple((a.name, a.size) for a in view.attributes), self.positions(view)
        )

    def selectable(self, view: ViewDecl) -> npt.NDArray[np.bool_] | None:
        q = self.question
        if not q.group_shape:
            return None
        pos = self.positions(view)
        kept = [i for i, p in enumerate(pos) if p < len(q.group_shape)]
        if not kept:
            return None
        shape = view.domain.shape
        places = np.unravel_index(q.places, q.group_shape)
        mask = np.zeros(tuple(shape[i] for i in kept), dtype=bool)
        mask[tuple(places[pos[i]] for i in kept)] = True
        full = [1] * len(shape)
        for i in kept:
            full[i] = shape[i]
        return np.broadcast_to(mask.reshape(full), shape)


class ParameterInUnits(UnsupportedError):
    """A question about units with ``$n`` parameters in its per-unit part: it is planned when
    executed, with the values bound (rewriter.compose), as a composed statement is."""


def _refuse(what: str, table: TableDecl, hint: str) -> UnsupportedError:
    return UnsupportedError(f"{what} (a question about the units of {table.name})", hint=hint)


def _unit_hint(table: TableDecl) -> str:
    return units_hint(table.name, table.unit.column if table.unit is not None else "the unit")


def _is_unit(node: exp.Expr, table: TableDecl, aliases: set[str]) -> bool:
    if isinstance(node, exp.Alias):
        node = node.this
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        return False
    assert table.unit is not None
    qual = node.args.get("table")
    if qual is not None and ident(qual) not in aliases:
        return False
    name = ident(node.this) if isinstance(node.this, exp.Identifier) else node.name.lower()
    return name == table.unit.column


def _counts_unit(node: exp.Expr, table: TableDecl, aliases: set[str]) -> bool | None:
    """For ``count(unit)``: False; ``count(DISTINCT unit)``: True; otherwise None."""
    if not isinstance(node, exp.Count):
        return None
    arg = node.this
    if isinstance(arg, exp.Distinct):
        items = arg.expressions
        if len(items) == 1 and _is_unit(items[0], table, aliases):
            return True
        return None
    if arg is not None and _is_unit(arg, table, aliases):
        return False
    return None


def _source(select: exp.Select, schema: Schema) -> tuple[exp.Table, TableDecl] | None:
    """The protected table ``select`` reads alone (no join), if any."""
    from_ = select.args.get("from_")
    if from_ is None or select.args.get("joins") or select.args.get("laterals"):
        return None
    node = from_.this
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        return None
    db = node.args.get("db")
    decl = schema.protected(ident(node.this), ident(db) if db is not None else None)
    return None if decl is None else (node, decl)


def _aliases(node: exp.Table, table: TableDecl) -> set[str]:
    alias = node.args.get("alias")
    if alias is not None and alias.this is not None:
        return {ident(alias.this)}
    return {table.name}


def _aggregate_call(n: exp.Expr) -> bool:
    """An aggregate call: ``agg(...)``, or ``agg(...) FILTER (WHERE ...)`` as a whole."""
    if isinstance(n, exp.Filter):
        return isinstance(n.this, exp.AggFunc)
    return isinstance(n, exp.AggFunc) and not isinstance(n.parent, exp.Filter)


def _aggregates(nodes: list[exp.Expression]) -> list[exp.Expr]:
    """The aggregate calls in ``nodes`` (not inside a subquery), in order, once each."""
    out: dict[str, exp.Expr] = {}
    for root in nodes:
        todo: list[exp.Expr] = [root]
        while todo:
            n = todo.pop()
            if n is not root and isinstance(n, exp.Subquery | exp.Select):
                continue
            if _aggregate_call(n):
                out.setdefault(n.sql(dialect="postgres"), n)
                continue
            todo.extend(reversed(list(n.iter_expressions())))
    return list(out.values())


def _keys(select: exp.Select, table: TableDecl) -> list[exp.Expression] | None:
    """The GROUP BY expressions, positions and output names resolved (None: grouping sets)."""
    group = select.args.get("group")
    if group is None:
        return []
    if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")) or any(
        isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets) for e in group.expressions
    ):
        return None
    items = select.expressions
    out_names = [output_name(e) for e in items]
    keys: list[exp.Expression] = []
    for g in group.expressions:
        n = _int_literal(g)
        if n is not None and 1 <= n <= len(items):
            keys.append(unalias(items[n - 1]))
            continue
        if isinstance(g, exp.Column) and not g.table and isinstance(g.this, exp.Identifier):
            name = ident(g.this)
            if table.column_type(name) is None and name in out_names:
                keys.append(unalias(items[out_names.index(name)]))
                continue
        keys.append(g)
    return keys


def rewrite(select: exp.Select, schema: Schema) -> tuple[exp.Select, UnitsTable] | None:
    """The statement over the derived relation of units, and that relation; None when
    ``select`` asks no question about units (it is then classified as before)."""
    chain = [select]
    while True:
        got = _derived(chain[-1])
        if got is None:
            break
        chain.append(got[0])
    inner = chain[-1]
    found = _source(inner, schema)
    if found is None:
        return None
    node, table = found
    if table.unit is None:
        return None
    aliases = _aliases(node, table)
    keys = _keys(inner, table)
    by_unit = keys is not None and any(_is_unit(k, table, aliases) for k in keys)
    if (
        inner.args.get("distinct") is not None
        and keys == []
        and not _aggregates(list(inner.expressions))
        and any(_is_unit(e, table, aliases) for e in inner.expressions)
    ):  # SELECT DISTINCT unit, g ... : GROUP BY unit, g
        keys = [unalias(e) for e in inner.expressions]
        by_unit = True
    calls = _aggregates([*inner.expressions, _having(inner)])
    for a in calls:
        if isinstance(a, exp.Filter) and _counts_unit(a.this, table, aliases):
            unit = table.unit.column
            raise _refuse(
                f"count(DISTINCT {unit}) FILTER (WHERE ...)",
                table,
                f"put the condition in the WHERE of a statement of its own, or count each "
                f"unit's matching rows in a subquery: SELECT count(*) FILTER (WHERE n > 0) "
                f"FROM (SELECT {unit}, count(*) FILTER (WHERE ...) AS n FROM {table.name} "
                f"GROUP BY {unit}) t",
            )
    distinct_unit = any(_counts_unit(a, table, aliases) for a in calls)
    if not by_unit and not distinct_unit:
        return None
    if table.unit.table is not None:
        raise _refuse(
            f"the privacy unit of {table.name} is reached through {table.unit.table}, so "
            f"{table.unit.column} does not identify a unit",
            table,
            "questions about units are answered for a table whose privacy_unit is one of its "
            "columns",
        )
    if table.unit_questions is False:
        raise _refuse(
            f"table {table.name} is declared with unit_questions = false",
            table,
            "an administrator declares unit_questions = true (the default) and starts a new epoch",
        )
    if by_unit:
        if len(chain) == 1:
            raise RowAccessError(
                f"grouping by the privacy unit {table.unit.column} of protected table "
                f"{table.name} gives one row per unit, and is refused",
                hint=_unit_hint(table),
            )
        assert keys is not None
        return _per_unit(select, inner, node, table, aliases, keys)
    return _distinct_units(select, inner, node, table, aliases, keys)


def _having(select: exp.Select) -> exp.Expression:
    h = select.args.get("having")
    return h.this if h is not None else exp.null()


def _check_inner(inner: exp.Select, table: TableDecl) -> None:
    if inner.args.get("limit") is not None or inner.args.get("offset") is not None:
        raise _refuse(
            "LIMIT or OFFSET inside the per-unit subquery",
            table,
            "a per-unit subquery keeps every unit; filter on its values outside it",
        )
    if any(isinstance(n, exp.Window) for n in inner.walk()):
        raise _refuse(
            "a window function inside the per-unit subquery",
            table,
            "compute per-unit values with count, sum, min, max or count(DISTINCT col)",
        )


def _per_unit(
    top: exp.Select,
    inner: exp.Select,
    node: exp.Table,
    table: TableDecl,
    aliases: set[str],
    keys: list[exp.Expression],
) -> tuple[exp.Select, UnitsTable]:
    """``SELECT unit, g..., agg... FROM T WHERE w GROUP BY unit, g... HAVING h`` read by an
    outer query: the inner replaced by a projection of ``D``."""
    _check_inner(inner, table)
    groups = [k for k in keys if not _is_unit(k, table, aliases)]
    items = [e for e in inner.expressions if not _is_unit(e, table, aliases)]
    having = inner.args.get("having")
    aggs = _aggregates([*items, *([having.this] if having is not None else [])])
    for a in aggs:
        if _counts_unit(a, table, aliases) is not None:
            raise _refuse(
                f"counting the privacy unit {table.unit.column if table.unit else ''} inside "
                "a subquery grouped by it",
                table,
                "count the units in the outer query: SELECT count(*) FROM (...) t",
            )
    # the statement as written, without the unit, checks grouping (42803) and every name
    check = exp.select(*(e.copy() for e in items or [exp.Count(this=exp.Star())]))
    check.set("from_", inner.args["from_"].copy())
    for key in ("where", "group", "having"):
        if inner.args.get(key) is not None:
            check.set(key, inner.args[key].copy())
    if groups:
        check.set("group", exp.Group(expressions=[g.copy() for g in groups]))
    else:
        check.set("group", None)
    normalise(check, table, check.args["from_"].this)
    _, decl = _question(inner, node, table, groups, aggs)
    names = {
        a.sql(dialect="postgres"): name for a, name in zip(aggs, _agg_names(aggs), strict=True)
    }

    def swap(n: exp.Expression) -> exp.Expression:
        if _aggregate_call(n):
            name = names.get(n.sql(dialect="postgres"))
            if name is not None:
                return exp.column(exp.to_identifier(name, quoted=True))
        return n

    projected = exp.select(*(e.copy().transform(swap) for e in inner.expressions))
    projected.set("from_", inner.args["from_"].copy())
    if having is not None:
        projected.set("where", exp.Where(this=having.this.copy().transform(swap)))
    inner.replace(projected)
    return top, decl


def _agg_names(aggs: list[exp.Expr]) -> list[str]:
    return [f"{AGG_PREFIX}{i}" for i in range(len(aggs))]


def _distinct_units(
    top: exp.Select,
    inner: exp.Select,
    node: exp.Table,
    table: TableDecl,
    aliases: set[str],
    keys: list[exp.Expression] | None,
) -> tuple[exp.Select, UnitsTable]:
    """``SELECT g..., count(DISTINCT unit) FROM T WHERE w GROUP BY g...``: the number of units
    in each group, over ``D`` grouped by ``unit, g...``."""
    unit = table.unit.column if table.unit is not None else ""
    if keys is None:
        raise _refuse(
            f"count(DISTINCT {unit}) with ROLLUP, CUBE or GROUPING SETS",
            table,
            "ask each grouping in a statement of its own",
        )
    clauses = [*inner.expressions, _having(inner)]
    order = inner.args.get("order")
    if order is not None:
        clauses.append(order)
    for a in _aggregates(clauses):
        if not _counts_unit(a, table, aliases):
            raise _refuse(
                f"count(DISTINCT {unit}) beside other aggregates in one statement",
                table,
                f"ask count(DISTINCT {unit}) in a statement of its own, or beside the other "
                "aggregates in one SELECT (a plan of two releases)",
            )
    _, decl = _question(inner, node, table, keys, [])

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Count) and _counts_unit(n, table, aliases):
            return exp.Count(this=exp.Star())
        return n

    rewritten = inner.copy().transform(swap)
    assert isinstance(rewritten, exp.Select)
    rewritten.set("where", None)
    if inner is top:
        return rewritten, decl
    inner.replace(rewritten)
    return top, decl


def finish(select: exp.Select, decl: UnitsTable) -> exp.Select:
    """The folded statement over ``D`` with ``count(unit)`` (never NULL there) counted as
    rows, and ``count(DISTINCT unit)`` too when each unit is one row (no group)."""
    unit = decl.unit.column if decl.unit is not None else ""
    aliases = {decl.name}
    from_ = select.args.get("from_")
    if from_ is not None and isinstance(from_.this, exp.Table):
        aliases = _aliases(from_.this, decl)

    def swap(n: exp.Expression) -> exp.Expression:
        kind = _counts_unit(n, decl, aliases) if isinstance(n, exp.Count) else None
        if kind is None:
            return n
        if kind and decl.question.num_groups > 1:
            raise _refuse(
                f"count(DISTINCT {unit}) over a relation with a row per unit and group",
                decl,
                "count the rows, or group the inner query by the unit alone",
            )
        return exp.Count(this=exp.Star())

    out = select.transform(swap)
    assert isinstance(out, exp.Select)
    return out


# -- the question -------------------------------------------------------------------------------


def _question(
    inner: exp.Select,
    node: exp.Table,
    table: TableDecl,
    groups: list[exp.Expression],
    aggs: list[exp.Expr],
) -> tuple[UnitQuestion, UnitsTable]:
    """Reduce ``SELECT count(*), agg... FROM T WHERE w GROUP BY g...`` and read it back as the
    question (each cell's group and per-cell weights), and the relation ``D``."""
    stmt = exp.select(exp.Count(this=exp.Star()), *(a.copy() for a in aggs))
    stmt.set("from_", exp.From(this=node.copy()))
    where = inner.args.get("where")
    if where is not None:
        stmt.set("where", where.copy())
    if groups:
        stmt.set("group", exp.Group(expressions=[g.copy() for g in groups]))
    logical = normalise(stmt, table, stmt.args["from_"].this)
    if logical.param_types:
        raise ParameterInUnits(
            f"a parameter inside the per-unit subquery (a question about the units of "
            f"{table.name})",
            hint="write the value itself there (parameters are taken in the outer query)",
        )
    plan = reduce(logical)
    if logical.grouping_sets or plan.grouped:  # a cell in several groups: never here
        raise _refuse("grouping sets in a per-unit query", table, "group by plain expressions")
    refs = [o for o in plan.post.outputs]
    if not all(isinstance(r, AggRef) for r in refs):
        raise _refuse("this per-unit value", table, "use count, sum, min, max or count(DISTINCT)")
    presence = refs[0]
    assert isinstance(presence, AggRef)
    group_of, _, _ = _per_cell(plan, presence.value)
    k = table.contribution.rows
    aggregates: list[UnitAggregate] = []
    attrs: dict[str, AttributeDecl] = {}
    columns: list[tuple[str, str]] = []
    for name, ref, call in zip(_agg_names(aggs), refs[1:], aggs, strict=True):
        assert isinstance(ref, AggRef)
        agg, pg_type = _aggregate(plan, ref, call, table, k, group_of >= 0)
        aggregates.append(agg)
        attrs[name] = _integer_attribute(name, pg_type, agg)
        columns.append((name, pg_type))
    read = set().union(*(_attrs_of(g) for g in logical.group_by)) if logical.group_by else set()
    base_names = plan.domain.names
    group_attrs = [n for n in base_names if n in read]
    group_shape = tuple(table.attributes[n].size for n in group_attrs)
    n_groups = len(plan.group_keys)
    if group_attrs:
        coords = np.unravel_index(np.arange(plan.domain.size), plan.domain.shape)
        part = np.ravel_multi_index([coords[base_names.index(n)] for n in group_attrs], group_shape)
        places = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
        on = group_of >= 0
        np.minimum.at(places, group_of[on], part[on])
        places[places == np.iinfo(np.int64).max] = 0  # a group no cell selects holds nothing
    else:
        places = np.zeros(n_groups, dtype=np.int64)
    unit = table.unit.column if table.unit is not None else ""
    source = f"each {unit}: {stmt.sql(dialect='postgres')}"
    question = UnitQuestion(
        base=plan.domain,
        groups=group_of,
        places=places,
        group_shape=group_shape,
        aggregates=tuple(aggregates),
    )
    decl = UnitsTable(
        name=table.name,
        schema=table.schema,
        columns=(*table.columns, *columns),
        attributes={**{n: table.attributes[n] for n in group_attrs}, **attrs},
        views=(),
        cell_limit=table.cell_limit,
        unit=table.unit,
        budget_group=table.budget_group,
        question=question,
        group_names=tuple(group_attrs),
        source=source,
    )
    return question, decl


def _per_cell(
    plan: Plan, j: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """For measure ``j`` of ``plan``, per cell of its marginal: the group the cell is in
    (``-1``: none, or a weight of 0), the cell's weight (unscaled), and for a histogram the
    code of the cell's value (``-1``: none)."""
    lay = plan.layouts[j]
    m = plan.batch.matrix
    n = m.shape[1]
    rw = plan.row_width
    group = np.full(n, -1, dtype=np.int64)
    weight = np.zeros(n, dtype=np.float64)
    code = np.full(n, -1, dtype=np.int64)
    for g in range(len(plan.group_keys)):
        for t in range(lay.width):
            r = g * rw + lay.offset + t
            lo, hi = int(m.indptr[r]), int(m.indptr[r + 1])
            cols = m.indices[lo:hi]
            group[cols] = g
            weight[cols] = m.data[lo:hi] * lay.scale
            code[cols] = t
    return group, weight, code


def _aggregate(
    plan: Plan,
    ref: AggRef,
    call: exp.Expr,
    table: TableDecl,
    k: int,
    selected: npt.NDArray[np.bool_],
) -> tuple[UnitAggregate, str]:
    """One per-unit aggregate and its type; ``selected``: the cells a group holds."""
    what = call.sql(dialect="postgres")
    if ref.func == "count":
        _, w, _ = _per_cell(plan, ref.value)
        # every unit of a group has a row there: a count of all of them is at least 1
        return UnitAggregate.counting(w > 0, lo=int(np.all(w[selected] > 0)), hi=k), "int8"
    if ref.func == "sum":
        if ref.pg_type not in _INT_TYPES or ref.count is None:
            raise _refuse(
                f"the per-unit value {what} of type {ref.pg_type}",
                table,
                "a per-unit sum is answered over an integer column (int2, int4)",
            )
        _, w, _ = _per_cell(plan, ref.value)
        w = w * ref.scale
        _, c, _ = _per_cell(plan, ref.count)
        counted = c > 0
        vals = np.rint(w[counted])
        if vals.size and not np.allclose(vals, w[counted]):
            raise _refuse(f"the per-unit value {what}", table, "sum integer values")
        top = float(vals.max()) if vals.size else 0.0
        bottom = float(vals.min()) if vals.size else 0.0
        agg = UnitAggregate(
            kind="sum",
            counted=counted,
            weights=np.rint(w),
            codes=np.zeros(w.shape[0], dtype=np.int64),
            values=(),
            lo=int(k * min(bottom, 0.0)),
            hi=int(k * max(top, 0.0)),
            nullable=True,
        )
        return agg, "int8"
    if ref.func in ("min", "max", "count_distinct"):
        _, _, codes = _per_cell(plan, ref.value)
        values = plan.layouts[ref.value].values
        if ref.func == "count_distinct":
            agg = UnitAggregate(
                kind="distinct",
                counted=codes >= 0,
                weights=np.zeros(codes.shape[0]),
                codes=np.maximum(codes, 0),
                values=tuple(range(len(values))),
                lo=int(np.all(codes[selected] >= 0)),
                hi=len(values),
                nullable=False,
            )
            return agg, "int8"
        days = [v for v in values if isinstance(v, dt.date)]
        if ref.pg_type == "date" and len(days) == len(values):
            # a first or last day of each unit (a cohort): days as their ordinals
            ints = tuple(d.toordinal() for d in days)
        elif ref.pg_type in _INT_TYPES and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        ):
            ints = tuple(int(v) for v in values)  # type: ignore[call-overload]
        else:
            raise _refuse(
                f"the per-unit value {what} of type {ref.pg_type}",
                table,
                "a per-unit min or max is answered over an integer column or a date declared "
                "by day",
            )
        agg = UnitAggregate(
            kind="min" if ref.func == "min" else "max",
            counted=codes >= 0,
            weights=np.zeros(codes.shape[0]),
            codes=np.maximum(codes, 0),
            values=ints,
            lo=min(ints, default=0),
            hi=max(ints, default=0),
            nullable=True,
        )
        return agg, ref.pg_type
    raise _refuse(
        f"the per-unit value {what}",
        table,
        "a per-unit value is an integer: count(*), count(col), count(DISTINCT col), sum, min or "
        "max of an integer column (an average per unit is avg over an outer query of counts)",
    )


def _integer_attribute(name: str, pg_type: str, agg: UnitAggregate) -> AttributeDecl:
    """The per-unit value as a column of the relation of units: one cell per integer (per
    day, as ordinals, for a date)."""
    return AttributeDecl(
        name=name,
        kind=Kind.DATE if pg_type == "date" else Kind.INTEGER,
        pg_type=pg_type,
        nullable=agg.nullable,
        bins=tuple((Fraction(v), Fraction(v)) for v in range(agg.lo, agg.hi + 1)),
        date_unit=DateUnit.DAY if pg_type == "date" else None,
    )


def split(tree: exp.Expr, schema: Schema) -> exp.Select | None:
    """``SELECT g..., count(DISTINCT unit), <other aggregates> FROM T WHERE w GROUP BY g...``
    as the composition of its two releases (docs/sql.md §2.6): the other aggregates of ``T``'s
    rows, and the number of units in each group, joined on the group keys (``IS NOT DISTINCT
    FROM``: every public group is in both), the statement's expressions, ``HAVING``, ``ORDER
    BY`` and ``LIMIT`` over them. None when ``tree`` is not that shape."""
    if not isinstance(tree, exp.Select) or _derived(tree) is not None:
        return None
    found = _source(tree, schema)
    if found is None or found[1].unit is None or found[1].unit.table is not None:
        return None
    node, table = found
    aliases = _aliases(node, table)
    having = tree.args.get("having")
    order = tree.args.get("order")
    clauses: list[exp.Expression] = [*tree.expressions]
    if having is not None:
        clauses.append(having.this)
    if order is not None:
        clauses.append(order)
    aggs = _aggregates(clauses)
    units_ = [a for a in aggs if _counts_unit(a, table, aliases)]
    rows = [a for a in aggs if not _counts_unit(a, table, aliases)]
    if not units_ or not rows or tree.args.get("distinct") is not None:
        return None
    keys = _keys(tree, table)
    if keys is None or any(_is_unit(k, table, aliases) for k in keys):
        return None
    key_names = [f"__lapras_key_{i}" for i in range(len(keys))]

    def part(calls: list[exp.Expr], prefix: str) -> exp.Select:
        items = [exp.alias_(k.copy(), n, quoted=True) for k, n in zip(keys, key_names, strict=True)]
        items += [exp.alias_(c.copy(), f"{prefix}{i}", quoted=True) for i, c in enumerate(calls)]
        sel = exp.select(*items)
        sel.set("from_", tree.args["from_"].copy())
        where = tree.args.get("where")
        if where is not None:
            sel.set("where", where.copy())
        if keys:
            sel.set("group", exp.Group(expressions=[k.copy() for k in keys]))
        return sel

    ref: dict[str, exp.Expr] = {}
    for i, k in enumerate(keys):
        ref[k.sql(dialect="postgres")] = exp.column(key_names[i], "r", quoted=True)
    for i, c in enumerate(rows):
        ref[c.sql(dialect="postgres")] = exp.column(f"a{i}", "r", quoted=True)
    for i, c in enumerate(units_):
        ref[c.sql(dialect="postgres")] = exp.column(f"u{i}", "u", quoted=True)

    def swap(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Identifier):  # a name inside a column, not an expression
            return n
        hit = ref.get(n.sql(dialect="postgres"))
        return hit.copy() if hit is not None else n

    items = [
        exp.alias_(unalias(e).copy().transform(swap), output_name(e), quoted=True)
        for e in tree.expressions
    ]
    out = exp.select(*items)
    out.set(
        "from_",
        exp.From(
            this=exp.Subquery(
                this=part(rows, "a"), alias=exp.TableAlias(this=exp.to_identifier("r"))
            )
        ),
    )
    right = exp.Subquery(this=part(units_, "u"), alias=exp.TableAlias(this=exp.to_identifier("u")))
    conds = [
        exp.NullSafeEQ(
            this=exp.column(n, "r", quoted=True), expression=exp.column(n, "u", quoted=True)
        )
        for n in key_names
    ]
    on = exp.and_(*conds) if conds else exp.true()
    out.set("joins", [exp.Join(this=right, on=on, kind="INNER")])
    if having is not None:
        out.set("where", exp.Where(this=having.this.copy().transform(swap)))
    if order is not None:
        out.set("order", order.copy().transform(swap))
    for key in ("limit", "offset"):
        if tree.args.get(key) is not None:
            out.set(key, tree.args[key].copy())
    return out


def described(logical: Logical, decl: UnitsTable) -> Logical:
    """``logical`` (over ``D``) with the per-unit query it reads in its template, so that
    statements over different questions about units never share a template."""
    return replace(logical, template=f"{logical.template} /* per unit: {decl.source} */")


__all__ = ["UnitsTable", "described", "finish", "rewrite", "split"]
