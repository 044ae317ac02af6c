"""Fold the wrappers tools put around one protected table into the one SELECT they mean.

BI tools and dataframe libraries rarely send the aggregate itself: they wrap it. Two shapes
are folded here, on the sqlglot tree, before the statement is normalised:

- a derived table or CTE that only filters, projects and renames rows of the protected table
  (``SELECT count(*) FROM (SELECT * FROM adult WHERE age > 30) t``, ibis' and dbt's nesting)
  is merged into the query that reads it: its WHERE joins the outer WHERE (AND), the outer
  query's columns are replaced by the expressions they name;
- an outer query over an inner *aggregate* that only filters, orders, limits, projects or
  computes on the inner's columns (``SELECT * FROM (SELECT race, count(*) AS n FROM adult GROUP
  BY 1) t ORDER BY n DESC LIMIT 3``) becomes the inner aggregate with the outer's conditions as
  HAVING, its expressions in the select list and its ORDER BY / LIMIT; ``SELECT count(*) FROM
  (<grouped aggregate>) q`` counts the inner's rows (the public groups, after HAVING).

Both are rewritings of the statement's text into an equivalent one (PostgreSQL's own
semantics: the subquery is pulled up, as its planner does); nothing is evaluated over rows.
A wrapper that does anything else (a join, DISTINCT ON, an aggregate over aggregates other
than counting the groups, a LIMIT inside a filter) is not folded and is refused as before.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from .names import ident, output_name, unalias


def _is_plain_filter(select: exp.Select) -> bool:
    """A SELECT that only filters and projects rows (no aggregate, grouping, DISTINCT,
    ORDER BY, LIMIT, window or set operation)."""
    if any(
        select.args.get(k)
        for k in ("group", "having", "distinct", "order", "limit", "offset", "joins", "laterals",
                  "windows", "qualify", "with_", "with", "locks", "sample", "into")
    ):  # fmt: skip
        return False
    return not any(isinstance(n, exp.AggFunc | exp.Window) for n in select.walk())


def _is_aggregate(select: exp.Select) -> bool:
    if any(select.args.get(k) for k in ("joins", "laterals", "with_", "with", "locks", "into")):
        return False
    return select.args.get("group") is not None or any(
        isinstance(n, exp.AggFunc) for e in select.expressions for n in e.walk()
    )


def _output_map(select: exp.Select) -> dict[str, exp.Expression] | None:
    """The inner query's output names and the expressions they stand for (None when ``*``
    is mixed in a way that hides names)."""
    out: dict[str, exp.Expression] = {}
    for item in select.expressions:
        inner = unalias(item)
        if isinstance(inner, exp.Star) or (
            isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)
        ):
            out["*"] = inner
            continue
        out.setdefault(output_name(item), inner)
    return out


def _substitute(
    node: exp.Expression,
    names: dict[str, exp.Expression],
    alias: str,
    keep: frozenset[str] = frozenset(),
) -> exp.Expression | None:
    """``node`` with each column of the derived table replaced by its expression; None when
    a column is neither an output of the derived table nor (under ``*``) a table column.
    Unqualified names in ``keep`` (the outer query's output aliases, in its ORDER BY) stay."""
    failed = False

    def repl(n: exp.Expression) -> exp.Expression:
        nonlocal failed
        if not isinstance(n, exp.Column) or isinstance(n.this, exp.Star):
            return n
        qual = ident(n.args.get("table")) if n.args.get("table") is not None else None
        if qual is not None and qual != alias:
            failed = True
            return n
        name = ident(n.this) if isinstance(n.this, exp.Identifier) else n.name.lower()
        if qual is None and name in keep:
            return n
        if name in names:
            return names[name].copy()
        if "*" in names:
            return exp.column(exp.to_identifier(name, quoted=True))
        failed = True
        return n

    out = node.copy().transform(repl)
    return None if failed else out


def _aliases(select: exp.Select) -> frozenset[str]:
    return frozenset(ident(e.args["alias"]) for e in select.expressions if isinstance(e, exp.Alias))


def _derived(select: exp.Select) -> tuple[exp.Select, str] | None:
    """The derived table (or the CTE) that ``select`` reads, with its alias."""
    from_ = select.args.get("from_")
    if from_ is None or select.args.get("joins") or select.args.get("laterals"):
        return None
    src = from_.this
    if isinstance(src, exp.Subquery) and isinstance(src.this, exp.Select):
        alias = ident(src.args["alias"].this) if src.args.get("alias") is not None else ""
        return src.this, alias
    with_ = select.args.get("with_") or select.args.get("with")
    if (
        isinstance(src, exp.Table)
        and isinstance(with_, exp.With)
        and not with_.args.get("recursive")
    ):
        name = ident(src.this) if isinstance(src.this, exp.Identifier) else ""
        ctes = [c for c in with_.expressions if isinstance(c, exp.CTE)]
        for cte in ctes:
            if ident(cte.args["alias"].this) == name and isinstance(cte.this, exp.Select):
                if len(ctes) != 1 or src.args.get("db") is not None:
                    return None
                alias = ident(src.args["alias"].this) if src.args.get("alias") is not None else name
                return cte.this, alias
    return None


Folded = tuple[exp.Select, str | None]


def fold(select: exp.Select, depth: int = 0) -> Folded | None:
    """The single SELECT over the protected table that ``select`` means, and the output name
    when it only counts that SELECT's rows; None when it is not a wrapper folded here."""
    if depth > 16:
        return None
    got = _derived(select)
    if got is None:
        return None
    inner, alias = got
    if _derived(inner) is not None:
        folded = fold(inner, depth + 1)
        if folded is None or folded[1] is not None:
            return None
        inner = folded[0]
    names = _output_map(inner)
    if names is None:
        return None
    if _is_plain_filter(inner):
        merged = _merge_filter(select, inner, names, alias)
        return None if merged is None else (merged, None)
    if _is_aggregate(inner):
        return _merge_aggregate(select, inner, names, alias)
    return None


def _merge_filter(
    outer: exp.Select, inner: exp.Select, names: dict[str, exp.Expression], alias: str
) -> exp.Select | None:
    merged = outer.copy()
    merged.set("with_", None)
    merged.set("with", None)
    merged.set("from_", inner.args["from_"].copy())
    items = _project(outer, inner, names, alias)
    if items is None:
        return None
    merged.set("expressions", items)
    for key in ("where", "group", "having", "order"):
        node = outer.args.get(key)
        if node is not None:
            keep = _aliases(outer) if key == "order" else frozenset()
            new = _substitute(node, names, alias, keep)
            if new is None:
                return None
            merged.set(key, new)
    inner_where = inner.args.get("where")
    if inner_where is not None:
        outer_where = merged.args.get("where")
        cond = inner_where.this.copy()
        if outer_where is not None:
            cond = exp.and_(exp.paren(cond), exp.paren(outer_where.this))
        merged.set("where", exp.Where(this=cond))
    return merged


def _merge_aggregate(
    outer: exp.Select, inner: exp.Select, names: dict[str, exp.Expression], alias: str
) -> Folded | None:
    if "*" in names or any(outer.args.get(k) for k in ("group", "having", "distinct")):
        return None
    if any(isinstance(n, exp.Window) for n in outer.walk()):
        return None
    counted = [e for e in outer.expressions if any(isinstance(n, exp.AggFunc) for n in e.walk())]
    merged = inner.copy()
    if counted:
        # SELECT count(*) FROM (<aggregate>) q: the number of the inner's rows
        if len(outer.expressions) != 1 or outer.args.get("where") or outer.args.get("order"):
            return None
        item = outer.expressions[0]
        agg = item.this if isinstance(item, exp.Alias) else item
        if not (isinstance(agg, exp.Count) and isinstance(agg.this, exp.Star)):
            return None
        for key in ("limit", "offset"):
            if outer.args.get(key) is not None:
                return None
        return merged, (ident(item.args["alias"]) if isinstance(item, exp.Alias) else "count")
    if (inner.args.get("limit") or inner.args.get("offset")) and (
        outer.args.get("where") or outer.args.get("order")
    ):
        return None
    items = _project(outer, inner, names, alias)
    if items is None:
        return None
    merged.set("expressions", items)
    where = outer.args.get("where")
    if where is not None:
        cond = _substitute(where.this, names, alias)
        if cond is None:
            return None
        having = merged.args.get("having")
        both = cond if having is None else exp.and_(exp.paren(having.this.copy()), exp.paren(cond))
        merged.set("having", exp.Having(this=both))
    order = outer.args.get("order")
    if order is not None:
        new_order = _substitute(order, names, alias, _aliases(outer))
        if new_order is None:
            return None
        merged.set("order", new_order)
    for key in ("limit", "offset"):
        if outer.args.get(key) is not None:
            if merged.args.get(key) is not None:
                return None
            merged.set(key, outer.args[key].copy())
    return merged, None


def _project(
    outer: exp.Select, inner: exp.Select, names: dict[str, exp.Expression], alias: str
) -> list[Any] | None:
    """The outer select list over the inner query's expressions (``*``: the inner's items),
    each keeping the name it had in the outer query."""
    items: list[Any] = []
    for item in outer.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            items.extend(e.copy() for e in inner.expressions)
            continue
        new = _substitute(item, names, alias)
        if new is None:
            return None
        if isinstance(new, exp.Alias):
            items.append(new)
        else:
            items.append(exp.alias_(new, exp.to_identifier(output_name(item), quoted=True)))
    return items
