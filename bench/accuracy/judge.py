"""How the session benchmark judges an answer against PostgreSQL's exact one (issue 39).

What a statement outputs (:func:`outputs`): each output column of its outermost SELECT (the
first branch of a set operation) is a *group key* or a *measure*. A measure is a column whose
expression holds an aggregate (or a window function over one), directly or through the column
of a derived table or CTE it names; everything else is a key. A measure's *rule*:

- ``count``: COUNT(...) or SUM(...) (not DISTINCT), possibly cast, rounded or coalesced, or a
  window SUM over them: within tolerance when ``|answer - exact| <= max(10% of |exact|, 150)``;
- ``statistic``: every other aggregate expression (AVG, ratios of counts, percentiles, MIN,
  MAX, COUNT(DISTINCT), STDDEV, VARIANCE, window functions of counts, differences): within
  tolerance when ``|answer - exact| <= 10% of |exact|``;
- a measure that is not a number (a boolean of a count, a date): equal to the exact value.

A statement is *within tolerance* when it is answered and every cell (row x measure) of the
exact answer is: rows are matched by their keys (by position when there are none), a row of
the exact answer that the answer lacks fails, and so does a NULL where the exact value is not
(or the reverse). A row the answer has and PostgreSQL does not (a group with no row, which the
product returns with count 0) is compared with 0 on its count measures; its statistics are
not judged.

The domain check (:func:`domain_violations`): a count or COUNT(DISTINCT) below 0 (or a
COUNT(DISTINCT) of a declared categorical column above its number of values), an AVG, MIN,
MAX, percentile or mode of a declared column outside its declared range, a SUM of a
non-negative column below 0, a STDDEV or VARIANCE below 0: such a value cannot be the answer
over any data the declaration allows. Only measures that are directly such an aggregate of a
declared column are checked.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from rewriter.schema import AttributeDecl, Kind, Schema

#: The count rule's relative and absolute tolerance, the statistic rule's relative one.
REL, ABS = 0.10, 150.0

_STAT_FUNCS: dict[type[exp.Expression], str] = {
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.PercentileCont: "percentile",
    exp.PercentileDisc: "percentile",
    exp.Median: "percentile",
    exp.Stddev: "stddev",
    exp.StddevPop: "stddev",
    exp.StddevSamp: "stddev",
    exp.Variance: "variance",
    exp.VariancePop: "variance",
}
#: Wrappers a measure may sit in without changing what it is.
_WRAPPERS = (exp.Cast, exp.TryCast, exp.Round, exp.Paren, exp.Alias)


@dataclass(frozen=True, slots=True)
class Output:
    """One output column: ``role`` is ``key``, ``count`` or ``statistic``; ``agg`` and
    ``column`` name the aggregate and the declared column it reads, when the measure is
    directly one (for the domain check)."""

    name: str
    role: str
    agg: str = ""
    column: str = ""


def _strip(node: exp.Expression) -> exp.Expression:
    while True:
        if isinstance(node, _WRAPPERS):
            node = node.this
        elif isinstance(node, exp.Coalesce) and node.this is not None:
            node = node.this  # COALESCE(SUM(x), 0): Looker's measures
        else:
            return node


def _has_agg(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.AggFunc) for n in node.walk())


def _measure(node: exp.Expression) -> Output:
    """The role of a measure expression (aggregate found), and its aggregate if direct."""
    core = _strip(node)
    if isinstance(core, exp.Window):
        inner = _strip(core.this)
        if isinstance(inner, exp.Sum) and _has_agg(inner.this):
            return Output("", "count")  # a running or partitioned total of counts
        return Output("", "statistic")
    if isinstance(core, exp.WithinGroup):
        col = core.expression.find(exp.Column) if core.expression else None
        return Output("", "statistic", "percentile", col.name if col else "")
    if isinstance(core, exp.Filter):
        core = _strip(core.this)
    if isinstance(core, exp.Count):
        arg = core.this
        if isinstance(arg, exp.Distinct):
            col = arg.find(exp.Column)
            return Output("", "statistic", "count_distinct", col.name if col else "")
        return Output("", "count", "count")
    if isinstance(core, exp.Sum):
        arg = _strip(core.this)
        return Output("", "count", "sum", arg.name if isinstance(arg, exp.Column) else "")
    for kind, name in _STAT_FUNCS.items():
        if isinstance(core, kind):
            arg = _strip(core.this) if core.this is not None else None
            return Output("", "statistic", name, arg.name if isinstance(arg, exp.Column) else "")
    if isinstance(core, exp.Anonymous) and core.name.lower() == "mode":
        return Output("", "statistic", "percentile")
    return Output("", "statistic")


def _sources(select: exp.Select, ctes: Mapping[str, exp.Expression]) -> dict[str, exp.Expression]:
    """The derived tables and CTEs ``select`` reads, by alias (the name a column may use)."""
    out: dict[str, exp.Expression] = {}
    tables = []
    from_ = select.args.get("from_")
    if from_ is not None:
        tables.append(from_.this)
    tables.extend(j.this for j in select.args.get("joins") or ())
    for t in tables:
        if isinstance(t, exp.Subquery):
            out[t.alias_or_name] = t.this
        elif isinstance(t, exp.Table) and t.name in ctes:
            out[t.alias_or_name] = ctes[t.name]
    return out


def _first_select(node: exp.Expression) -> exp.Select | None:
    while isinstance(node, exp.SetOperation | exp.Subquery | exp.Paren):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def _resolve(
    node: exp.Expression, select: exp.Select, ctes: Mapping[str, exp.Expression], depth: int = 0
) -> Output | None:
    """A measure's role if ``node`` is one (through derived tables and CTEs), else None."""
    if _has_agg(node):
        return _measure(node)
    if depth > 8:
        return None
    for col in node.find_all(exp.Column):
        sources = _sources(select, ctes)
        cands = [sources[col.table]] if col.table in sources else list(sources.values())
        for src in cands:
            inner = _first_select(src)
            if inner is None:
                continue
            for p in inner.expressions:
                if p.alias_or_name == col.name:
                    found = _resolve(p.unalias(), inner, _ctes(src, ctes), depth + 1)
                    if found is not None:
                        if _strip(node) is col:
                            return found  # the column itself: its source's role and aggregate
                        return Output("", "statistic")  # an expression of measures
    return None


def _ctes(node: exp.Expression, outer: Mapping[str, exp.Expression]) -> dict[str, exp.Expression]:
    out = dict(outer)
    with_ = node.args.get("with_")
    if with_ is not None:
        for cte in with_.expressions:
            out[cte.alias] = cte.this
    return out


def _grouped(select: exp.Select) -> set[int]:
    """The output columns the outermost GROUP BY names (by position, alias or expression):
    keys, even when they are computed from an inner aggregate (a per-user count's bucket)."""
    group = select.args.get("group")
    if group is None:
        return set()
    projections = select.expressions
    names = [p.alias_or_name for p in projections]
    out = set()
    for g in group.expressions:
        if isinstance(g, exp.Literal) and not g.is_string:
            out.add(int(g.name) - 1)
        elif isinstance(g, exp.Column) and not g.table and g.name in names:
            out.add(names.index(g.name))
        else:
            out.update(i for i, p in enumerate(projections) if p.unalias() == g)
    return out


def outputs(sql: str) -> tuple[Output, ...]:
    """The output columns of ``sql`` with their roles (see the module doc)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    ctes = _ctes(tree, {})
    select = _first_select(tree)
    if select is None:
        raise ValueError("not a SELECT")
    ctes = _ctes(select, ctes)
    grouped = _grouped(select)
    out = []
    for i, p in enumerate(select.expressions):
        found = None if i in grouped else _resolve(p.unalias(), select, ctes)
        name = p.alias_or_name or f"column{i + 1}"
        if found is None:
            out.append(Output(name, "key"))
        else:
            out.append(Output(name, found.role, found.agg, found.column))
    return tuple(out)


# ------------------------------------------------------------------------------------------
# values and rows


def number(v: object) -> float | None:
    """A numeric value as a float (None for NULL, NaN and non-numbers)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int | float | Decimal):
        f = float(v)
        return None if math.isnan(f) else f
    return None


def key_text(v: object) -> str:
    """A key value in one spelling whatever the client library gave (numbers, dates, text)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(v).lower()
    f = number(v)
    if f is not None:
        return repr(round(f, 6) + 0.0)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.date().isoformat() if v.time() == dt.time() else v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    text = str(v)
    try:  # a number or a date that came as text (a peer's worker)
        return key_text(float(text))
    except ValueError:
        pass
    for parse in (dt.datetime.fromisoformat, dt.date.fromisoformat):
        try:
            return key_text(parse(text))
        except ValueError:
            pass
    return text


@dataclass(frozen=True, slots=True)
class Cell:
    role: str
    agg: str
    column: str
    exact: object
    answer: object
    missing: bool  # the answer has no row for this exact row
    ok: bool

    @property
    def error(self) -> float | None:
        a, t = number(self.answer), number(self.exact)
        return None if a is None or t is None or self.missing else abs(a - t)


@dataclass(slots=True)
class Judgement:
    """One answered statement against the exact answer."""

    cells: list[Cell] = field(default_factory=list)
    extra: list[Cell] = field(default_factory=list)  # cells of rows PostgreSQL does not have

    @property
    def within(self) -> bool:
        return all(c.ok for c in self.cells) and all(c.ok for c in self.extra)


def within(role: str, answer: object, exact: object) -> bool:
    """The tolerance rule for one cell (see the module doc)."""
    if exact is None or answer is None:
        return exact is None and answer is None
    a, t = number(answer), number(exact)
    if a is None or t is None:
        return key_text(answer) == key_text(exact)
    if role == "count":
        return abs(a - t) <= max(REL * abs(t), ABS)
    return abs(a - t) <= REL * abs(t)


def _rows_by_key(
    outs: Sequence[Output], rows: Iterable[Sequence[Any]]
) -> dict[tuple[str, ...], Sequence[Any]]:
    keys = [i for i, o in enumerate(outs) if o.role == "key"]
    out: dict[tuple[str, ...], Sequence[Any]] = {}
    for pos, row in enumerate(rows):
        k = tuple(key_text(row[i]) for i in keys) if keys else (str(pos),)
        n = 0
        while (*k, f"#{n}") in out:
            n += 1
        out[(*k, f"#{n}")] = row
    return out


def judge(
    outs: Sequence[Output], exact: Sequence[Sequence[Any]], answer: Sequence[Sequence[Any]]
) -> Judgement:
    """Every cell of ``exact`` against ``answer`` (rows matched by key), see the module doc."""
    t_rows, a_rows = _rows_by_key(outs, exact), _rows_by_key(outs, answer)
    measures = [(i, o) for i, o in enumerate(outs) if o.role != "key"]
    j = Judgement()
    for key, t in t_rows.items():
        a = a_rows.get(key)
        for i, o in measures:
            if a is None or len(a) != len(outs):
                j.cells.append(Cell(o.role, o.agg, o.column, t[i], None, True, False))
            else:
                j.cells.append(
                    Cell(o.role, o.agg, o.column, t[i], a[i], False, within(o.role, a[i], t[i]))
                )
    for key, a in a_rows.items():
        if key in t_rows or len(a) != len(outs):
            continue
        for i, o in measures:
            if o.role == "count":
                ok = number(a[i]) is not None and within("count", a[i], 0)
                j.extra.append(Cell(o.role, o.agg, o.column, 0, a[i], False, ok))
            else:
                j.extra.append(Cell(o.role, o.agg, o.column, None, a[i], False, True))
    return j


# ------------------------------------------------------------------------------------------
# the domain check


def _range(attr: AttributeDecl) -> tuple[float, float] | None:
    if attr.kind in (Kind.INTEGER, Kind.NUMERIC, Kind.DATE) and attr.bins:
        return float(attr.bins[0][0]), float(attr.bins[-1][1])
    return None


def _ordinal(v: object) -> float | None:
    if isinstance(v, dt.datetime):
        return float(v.date().toordinal())
    if isinstance(v, dt.date):
        return float(v.toordinal())
    return number(v)


def out_of_domain(cell: Cell, attrs: Mapping[str, AttributeDecl]) -> bool:
    """Whether ``cell``'s answer is a value no data allowed by the declaration could give."""
    if cell.answer is None:
        return False
    a = _ordinal(cell.answer)
    if a is None:
        return False
    attr = attrs.get(cell.column)
    if cell.agg in ("count", "count_distinct") and a < 0:
        return True
    if cell.agg == "count_distinct" and attr is not None and attr.kind is Kind.CATEGORICAL:
        return a > len(attr.values) + (1 if attr.nullable else 0)
    if cell.agg in ("stddev", "variance"):
        return a < 0
    if attr is None:
        return False
    bounds = _range(attr)
    if bounds is None:
        return False
    lo, hi = bounds
    if cell.agg in ("avg", "min", "max", "percentile"):
        return not lo - 1e-9 <= a <= hi + 1e-9
    if cell.agg == "sum" and lo >= 0:
        return a < 0
    return False


def attributes(schema: Schema, table: str) -> dict[str, AttributeDecl]:
    return dict(schema.tables[table].attributes)


def domain_violations(j: Judgement, attrs: Mapping[str, AttributeDecl]) -> int:
    return sum(out_of_domain(c, attrs) for c in [*j.cells, *j.extra])
