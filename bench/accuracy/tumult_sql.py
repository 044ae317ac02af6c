"""SQL to Tumult Analytics queries, for the session benchmark (issue 39): the mechanical part.

Tumult Analytics has no SQL interface, so the benchmark translates what translates without
judgement, and counts the rest as not accepted (:class:`NotExpressible` says why):

- ``FROM`` one protected table (quoted, schema-qualified, aliased), or a derived table or CTE
  that only filters it (``SELECT * | columns FROM t WHERE ...``, nested);
- ``WHERE`` (and an aggregate's ``FILTER (WHERE ...)``) as a Spark SQL condition over the
  table's columns (Tumult's ``filter``);
- ``GROUP BY`` plain columns (by name, alias or position) with a finite declared domain
  (categorical values, integers of unit bins), as a ``KeySet`` of the declared values;
- output columns that are group keys or one aggregate, possibly cast, rounded or coalesced:
  COUNT(*), COUNT(1), COUNT(column), SUM(1) (count); SUM, AVG, MIN, MAX, STDDEV(_SAMP/_POP),
  VARIANCE (VAR_SAMP/VAR_POP), PERCENTILE_CONT/DISC WITHIN GROUP, MEDIAN of a declared
  numeric column (clamped to its declared range); COUNT(DISTINCT column);
- ``ORDER BY`` output columns and ``LIMIT``/``FETCH FIRST`` as post-processing of the noisy
  result (what a client would do).

Not translated: joins, set operations, window functions, HAVING, DISTINCT, expressions over
aggregates or in GROUP BY (CASE, date_trunc, bins), subqueries that aggregate.

>>> from rewriter import load_schema
>>> from sql_fixtures import adult
>>> spec = translate("SELECT sex, count(*) FROM adult WHERE age > 30 GROUP BY 1", load_schema(adult.DECLARATION))
>>> spec["table"], spec["where"], spec["group_by"], [a["func"] for a in spec["aggs"]]
('adult', 'age > 30', ['sex'], ['count'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from rewriter.schema import AttributeDecl, Kind, Schema


class NotExpressible(ValueError):
    """The statement has no mechanical translation to Tumult queries (the message says why)."""


_FUNCS: dict[type[exp.Expression], str] = {
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.Stddev: "stdev",
    exp.StddevSamp: "stdev",
    exp.StddevPop: "stdev",
    exp.Variance: "variance",
    exp.VariancePop: "variance",
    exp.Median: "quantile",
}


def _unwrap(node: exp.Expression) -> tuple[exp.Expression, int | None]:
    """The aggregate under casts, ROUND (its digits) and COALESCE(x, 0)."""
    digits = None
    while True:
        if isinstance(node, exp.Cast | exp.TryCast | exp.Paren):
            node = node.this
        elif isinstance(node, exp.Round):
            d = node.args.get("decimals")
            digits = int(d.name) if isinstance(d, exp.Literal) else 0
            node = node.this
        elif isinstance(node, exp.Coalesce) and len(node.expressions) == 1:
            other = node.expressions[0]
            if not (isinstance(other, exp.Literal) and other.name in ("0", "0.0")):
                raise NotExpressible("COALESCE with a value other than 0")
            node = node.this
        else:
            return node, digits


def _column(node: exp.Expression | None) -> str:
    while isinstance(node, exp.Cast | exp.TryCast | exp.Paren):
        node = node.this
    if not isinstance(node, exp.Column):
        raise NotExpressible("an aggregate of an expression")
    return node.name


def _bounds(attr: AttributeDecl) -> list[float]:
    if attr.kind not in (Kind.INTEGER, Kind.NUMERIC) or not attr.bins:
        raise NotExpressible(f"{attr.name} has no numeric range")
    return [float(attr.bins[0][0]), float(attr.bins[-1][1])]


def _agg(
    node: exp.Expression, attrs: Mapping[str, AttributeDecl], unit: str | None
) -> dict[str, Any]:
    where = None
    if isinstance(node, exp.Filter):
        where = _condition(node.expression.this, attrs)
        node = node.this
    node, digits = _unwrap(node)
    out: dict[str, Any] = {"where": where, "round": digits}
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise NotExpressible("COUNT(DISTINCT) of several columns")
            col = _column(arg.expressions[0])
            if col not in attrs and col != unit:
                raise NotExpressible(f"COUNT(DISTINCT {col})")
            return {**out, "func": "count_distinct", "column": col}
        if arg is None or isinstance(arg, exp.Star | exp.Literal | exp.Column):
            return {**out, "func": "count", "column": None}
        raise NotExpressible("COUNT of an expression")
    if isinstance(node, exp.Sum):
        arg = node.this
        while isinstance(arg, exp.Cast | exp.Paren):
            arg = arg.this
        if isinstance(arg, exp.Literal) and not arg.is_string and arg.name == "1":
            return {**out, "func": "count", "column": None}
        col = _column(arg)
        return {**out, "func": "sum", "column": col, "bounds": _bounds(_attr(attrs, col))}
    if isinstance(node, exp.WithinGroup):
        inner = node.this
        if not isinstance(inner, exp.PercentileCont | exp.PercentileDisc):
            raise NotExpressible("an ordered-set aggregate other than a percentile")
        q = inner.this
        if not isinstance(q, exp.Literal) or q.is_string:
            raise NotExpressible("a percentile of several fractions")
        order = node.expression
        col = _column(order.expressions[0].this if isinstance(order, exp.Order) else order)
        return {
            **out,
            "func": "quantile",
            "column": col,
            "quantile": float(q.name),
            "bounds": _bounds(_attr(attrs, col)),
        }
    for kind, name in _FUNCS.items():
        if type(node) is kind:
            col = _column(node.this)
            extra = {"quantile": 0.5} if name == "quantile" else {}
            return {
                **out,
                "func": name,
                "column": col,
                "bounds": _bounds(_attr(attrs, col)),
                **extra,
            }
    raise NotExpressible(f"the aggregate {node.sql(dialect='postgres')[:40]}")


def _attr(attrs: Mapping[str, AttributeDecl], col: str) -> AttributeDecl:
    if col not in attrs:
        raise NotExpressible(f"column {col} has no declared domain")
    return attrs[col]


def _condition(node: exp.Expression, attrs: Mapping[str, AttributeDecl]) -> str:
    """``node`` as a Spark SQL condition over the table's own column names."""
    node = node.copy()
    if any(isinstance(n, exp.Subquery | exp.Select | exp.AggFunc) for n in node.walk()):
        raise NotExpressible("a condition with a subquery or an aggregate")
    for col in list(node.find_all(exp.Column)):
        if col.name not in attrs:
            raise NotExpressible(f"a condition on {col.name}")
        col.replace(exp.column(col.name))
    return node.sql(dialect="spark")


def _source(
    node: exp.Expression, ctes: Mapping[str, exp.Expression], tables: Sequence[str]
) -> tuple[str, list[str]]:
    """The protected table ``node`` reads and the conditions of the filter-only derived
    tables and CTEs in between (outermost first)."""
    if isinstance(node, exp.Subquery):
        node = node.this
    if isinstance(node, exp.Table):
        if node.name in ctes:
            return _source(ctes[node.name], ctes, tables)
        if node.name in tables:
            return node.name, []
        raise NotExpressible(f"FROM {node.name}")
    if not isinstance(node, exp.Select):
        raise NotExpressible("FROM something other than a table or a filter of it")
    for key in ("joins", "group", "having", "order", "limit", "offset", "distinct", "with_"):
        if node.args.get(key):
            raise NotExpressible("a derived table that does more than filter")
    if any(_aggregates(p) for p in node.expressions):
        raise NotExpressible("a derived table of aggregates")
    from_ = node.args.get("from_")
    if from_ is None:
        raise NotExpressible("a derived table without FROM")
    table, conds = _source(from_.this, ctes, tables)
    where = node.args.get("where")
    return table, ([where.this] if where is not None else []) + conds


def _aggregates(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.AggFunc | exp.Window) for n in node.walk())


def translate(sql: str, schema: Schema) -> dict[str, Any]:
    """The Tumult description of ``sql`` (NotExpressible when it has none):
    ``{"table", "where", "group_by", "aggs", "outputs", "order", "limit"}``; ``outputs`` gives,
    per output column, ``["key", i]`` (the i-th group key) or ``["agg", j]``."""
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except sqlglot.errors.ParseError as e:
        raise NotExpressible("not parsed") from e
    if not isinstance(tree, exp.Select):
        raise NotExpressible("not a single SELECT")
    ctes = {}
    with_ = tree.args.get("with_")
    if with_ is not None:
        ctes = {c.alias: c.this for c in with_.expressions}
    for key in ("joins", "having", "distinct", "offset", "qualify"):
        if tree.args.get(key):
            raise NotExpressible(key.upper())
    if any(isinstance(n, exp.Window) for n in tree.walk()):
        raise NotExpressible("a window function")
    from_ = tree.args.get("from_")
    if from_ is None:
        raise NotExpressible("no FROM")
    table, conds = _source(from_.this, ctes, list(schema.tables))
    decl = schema.tables[table]
    attrs = dict(decl.attributes)
    unit = decl.unit.column if decl.unit is not None else None
    where = tree.args.get("where")
    conds = ([where.this] if where is not None else []) + conds
    condition = " AND ".join(f"({_condition(c, attrs)})" for c in conds) or None

    projections = tree.expressions
    names = [p.alias_or_name for p in projections]
    group_by: list[str] = []
    group = tree.args.get("group")
    for g in group.expressions if group else []:
        if isinstance(g, exp.Literal) and not g.is_string:
            target = projections[int(g.name) - 1].unalias()
        elif isinstance(g, exp.Column) and not g.table and g.name in names:
            target = projections[names.index(g.name)].unalias()
        else:
            target = g
        col = _column(target) if isinstance(target, exp.Column) else None
        if col is None:
            raise NotExpressible("GROUP BY an expression")
        attr = _attr(attrs, col)
        if attr.kind is Kind.NUMERIC or (attr.kind is not Kind.CATEGORICAL and not attr.unit_bins):
            raise NotExpressible(f"GROUP BY {col}, which has no finite set of values")
        group_by.append(col)
    aggs: list[dict[str, Any]] = []
    outputs: list[list[Any]] = []
    for p in projections:
        node = p.unalias()
        if _aggregates(node):
            aggs.append(_agg(node, attrs, unit))
            outputs.append(["agg", len(aggs) - 1])
        elif isinstance(node, exp.Column) and node.name in group_by:
            outputs.append(["key", group_by.index(node.name)])
        else:
            raise NotExpressible("an output column that is neither a group key nor an aggregate")
    if not aggs:
        raise NotExpressible("no aggregate")
    order: list[list[Any]] = []
    order_node = tree.args.get("order")
    limit = _limit(tree)
    for o in order_node.expressions if order_node else []:
        target = o.this
        idx = None
        if isinstance(target, exp.Literal) and not target.is_string:
            idx = int(target.name) - 1
        elif isinstance(target, exp.Column) and target.name in names:
            idx = names.index(target.name)
        else:
            same = [i for i, p in enumerate(projections) if p.unalias() == target]
            idx = same[0] if same else None
        if idx is None:
            if limit is not None:
                raise NotExpressible("ORDER BY something not in the output, with LIMIT")
            continue
        order.append([idx, bool(o.args.get("desc"))])
    return {
        "table": table,
        "where": condition,
        "group_by": group_by,
        "aggs": aggs,
        "outputs": outputs,
        "order": order,
        "limit": limit,
    }


def _limit(tree: exp.Select) -> int | None:
    node = tree.args.get("limit")
    if node is None:
        return None
    value = node.expression if isinstance(node, exp.Limit | exp.Fetch) else node
    if isinstance(node, exp.Fetch):
        value = node.args.get("count")
    if not isinstance(value, exp.Literal) or value.is_string:
        raise NotExpressible("a LIMIT that is not a number")
    return int(value.name)


def rows(spec: Mapping[str, Any], result: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """The statement's rows from the worker's (group keys, then each aggregate's value), in
    the statement's output order, rounded, ordered and limited as the SQL asks."""
    nk = len(spec["group_by"])
    out = []
    for r in result:
        row = []
        for kind, i in spec["outputs"]:
            if kind == "key":
                row.append(r[i])
            else:
                v = r[nk + i]
                digits = spec["aggs"][i].get("round")
                if v is not None and digits is not None:
                    v = round(float(v), digits)
                row.append(v)
        out.append(tuple(row))
    for idx, desc in reversed(spec["order"]):
        out.sort(key=lambda row, i=idx: (row[i] is None, row[i]), reverse=bool(desc))
    if spec["limit"] is not None:
        out = out[: spec["limit"]]
    return out
