"""Probes tools send: existence checks and limited row counts, answered from noisy counts.

Tools ask whether rows exist, or how many rows a limited query returns, in shapes that read
rows of the table. Each is the same question as a count of the rows the statement's conditions
select, so it is answered from one (post-processing of a DP count; docs/sql.md §3):

- **Existence checks** — Django's and peewee's ``.exists()`` (``SELECT 1 AS "a" FROM t WHERE c
  LIMIT 1``: constants only, ``LIMIT 1``) and ``SELECT [NOT] EXISTS (SELECT ... FROM t WHERE c)
  [AS x]`` (SQLAlchemy's ``exists()``; several in one select list, each with its own
  condition). The answer is true when the noisy count of the rows ``c`` selects rounds to at
  least 1 (a public threshold): the count a ``SELECT count(*)`` of the same rows shows, so the
  two never disagree, and with exact answers (noise off) PostgreSQL's answer. The ``LIMIT 1``
  form returns its one row of constants when true, no row when false.
- **Limited row counts** — Superset's raw-records mode counts the rows of a limited subquery
  for pagination: ``SELECT count(*) AS rowcount FROM (SELECT ... FROM t WHERE c LIMIT n) AS q``
  is ``least(count(*), n)`` over the rows ``c`` selects (``OFFSET m`` too: ``least(greatest(
  count(*) - m, 0), n)``): the noisy count, capped by the public limit.

The statements are rewritten here into those aggregates (sqlglot trees), then classified as
any DP statement; :func:`exists` turns their ``count(...) > 0`` into the existence test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

if TYPE_CHECKING:
    from .plan import Logical, OutputColumn, PostExpr
    from .schema import TableDecl

Protected = Callable[[exp.Table], "TableDecl | None"]


def _constant(node: exp.Expression) -> bool:
    """A select-list item that reads no column (a literal, NULL, TRUE, a cast of one)."""
    inner = node.this if isinstance(node, exp.Alias) else node
    return not any(
        isinstance(n, exp.Column | exp.Star | exp.Query | exp.AggFunc | exp.Window)
        for n in inner.walk()
    )


def _limit(select: exp.Select, key: str) -> int | None:
    """A constant ``LIMIT``/``FETCH FIRST n ROWS ONLY`` or ``OFFSET`` (None: none; -1: one
    that is not a plain number, or ``WITH TIES``/``PERCENT``)."""
    node = select.args.get(key)
    if node is None:
        return None
    options = node.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        return -1
    e = node.args.get("expression") or node.args.get("count") or node.this
    if isinstance(e, exp.Literal) and not e.is_string and str(e.this).isdigit():
        return int(str(e.this))
    return -1


def _reads_rows(select: exp.Select, protected: Protected) -> bool:
    """A plain SELECT of the protected table alone: no aggregate, grouping, DISTINCT, join,
    CTE or subquery."""
    from_ = select.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table) or protected(from_.this) is None:
        return False
    if any(
        select.args.get(k)
        for k in ("group", "having", "distinct", "joins", "laterals", "with_", "windows", "locks",
                  "into", "qualify")
    ):  # fmt: skip
        return False
    return not any(
        isinstance(n, exp.AggFunc | exp.Window | exp.Subquery)
        or (n is not select and isinstance(n, exp.Select))
        for n in select.walk()
    )


def _count_above_zero(where: exp.Expression | None) -> exp.Expression:
    count: exp.Expression = exp.Count(this=exp.Star())
    if where is not None:
        count = exp.Filter(this=count, expression=exp.Where(this=where.copy()))
    return exp.GT(this=count, expression=exp.Literal.number(0))


def rewrite(select: exp.Select, protected: Protected) -> exp.Select | None:
    """The DP statement a probe means (a new tree; :func:`exists` then marks its existence
    tests), or None when ``select`` is no probe of these shapes."""
    return (
        _limit_one(select, protected) or _exists(select, protected) or _rowcount(select, protected)
    )


def _limit_one(select: exp.Select, protected: Protected) -> exp.Select | None:
    """``SELECT <constants> FROM t [WHERE c] LIMIT 1`` (or ``FETCH FIRST 1 ROW ONLY``, ``OFFSET
    0``): its row when ``c`` selects a row."""
    if _limit(select, "limit") != 1 or _limit(select, "offset") not in (None, 0):
        return None
    if not _reads_rows(select, protected) or not all(_constant(e) for e in select.expressions):
        return None
    out = select.copy()
    out.set("having", exp.Having(this=_count_above_zero(None)))
    out.set("limit", None)
    out.set("offset", None)
    return out


def _exists(select: exp.Select, protected: Protected) -> exp.Select | None:
    """A statement without a FROM over ``[NOT] EXISTS (SELECT ... FROM t [a] [WHERE c] [LIMIT
    n])`` tests and constants (``SELECT EXISTS (...) AS x, ...``, ``SELECT CASE WHEN EXISTS
    (...) THEN 1 ELSE 0 END``, ``SELECT 1 WHERE EXISTS (...)``): each test ``count(*) FILTER
    (WHERE c) > 0`` over ``FROM t`` (the subqueries' conditions read with their own aliases),
    its WHERE a HAVING (one row, or none)."""
    if select.args.get("from_") is not None or any(
        select.args.get(k) for k in ("group", "having", "joins", "with_", "distinct")
    ):
        return None
    where = select.args.get("where")
    items = [item.copy() for item in select.expressions]
    having = where.this.copy() if where is not None else None
    tests: list[exp.Exists] = []
    for part in (*items, *([having] if having is not None else [])):
        if not _constant_but_exists(part):
            return None
        tests += [n for n in part.walk(prune=_is_exists) if isinstance(n, exp.Exists)]
    if not tests:
        return None
    table: exp.Table | None = None
    counts: dict[int, exp.Expression] = {}
    for test in tests:
        sub = test.this
        if not isinstance(sub, exp.Select) or not _reads_rows(sub, protected):
            return None
        if _limit(sub, "limit") in (0, -1) or sub.args.get("offset") is not None:
            return None
        src = sub.args["from_"].this
        if table is None:
            table = src
        elif protected(src) is not protected(table):
            return None
        cond = sub.args["where"].this if sub.args.get("where") is not None else None
        counts[id(test)] = _count_above_zero(
            None if cond is None else _requalified(cond, src, table)
        )
    assert table is not None

    def tested(node: exp.Expression) -> exp.Expression:
        return exp.Paren(this=counts[id(node)].copy()) if id(node) in counts else node

    outputs = []
    for item in items:  # copies: the tests found in them are replaced in place
        inner = item.this if isinstance(item, exp.Alias) else item
        name = (
            item.args["alias"]
            if isinstance(item, exp.Alias)
            else exp.to_identifier(_name(inner), quoted=True)
        )
        outputs.append(exp.Alias(this=inner.transform(tested, copy=False), alias=name))
    out = exp.Select(expressions=outputs, from_=exp.From(this=table.copy()))
    if having is not None:
        out.set("having", exp.Having(this=having.transform(tested, copy=False)))
    for key in ("order", "limit", "offset"):
        if select.args.get(key) is not None:
            out.set(key, select.args[key].copy())
    return out


def _is_exists(node: exp.Expr) -> bool:
    return isinstance(node, exp.Exists)


def _constant_but_exists(node: exp.Expression) -> bool:
    """Whether ``node`` reads nothing but its ``EXISTS`` tests (constants and operators over
    them)."""
    return not any(
        isinstance(n, exp.Column | exp.Star | exp.AggFunc | exp.Window)
        or (isinstance(n, exp.Query) and not isinstance(n.parent, exp.Exists))
        for n in node.walk(prune=_is_exists)
        if not isinstance(n, exp.Exists)
    )


def _name(node: exp.Expression) -> str:
    """The column name PostgreSQL gives a select-list item of tests: ``exists`` for an EXISTS
    (FigureColname names the sublink), else as any item (``case``, ``?column?``)."""
    from .names import output_name

    while isinstance(node, exp.Paren):
        node = node.this
    return "exists" if isinstance(node, exp.Exists) else output_name(node)


def _requalified(cond: exp.Expression, src: exp.Table, into: exp.Table) -> exp.Expression:
    """``cond`` (over ``src`` and its alias) with its qualified columns over ``into``."""
    names = {src.name.lower()}
    if src.alias:
        names = {src.alias_or_name}
    target = into.alias_or_name

    def repl(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.table and n.table in names:
            return exp.column(n.this.copy(), table=exp.to_identifier(target))
        return n

    return cond.copy().transform(repl)


def _rowcount(select: exp.Select, protected: Protected) -> exp.Select | None:
    """``SELECT count(*) [AS n] FROM (SELECT ... FROM t [WHERE c] LIMIT k [OFFSET m]) q``:
    ``SELECT least(greatest(count(*) - m, 0), k) AS n FROM t [WHERE c]``."""
    from_ = select.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Subquery) or len(select.expressions) != 1:
        return None
    if any(
        select.args.get(k)
        for k in ("where", "group", "having", "joins", "with_", "order", "limit", "offset", "distinct")
    ):  # fmt: skip
        return None
    item = select.expressions[0]
    agg = item.this if isinstance(item, exp.Alias) else item
    if not (isinstance(agg, exp.Count) and isinstance(agg.this, exp.Star)):
        return None
    inner = from_.this.this
    if not isinstance(inner, exp.Select) or not _reads_rows(inner, protected):
        return None
    limit, offset = _limit(inner, "limit"), _limit(inner, "offset")
    if limit is None or limit < 0 or (offset is not None and offset < 0):
        return None
    count: exp.Expression = exp.Count(this=exp.Star())
    if offset:
        count = exp.Greatest(
            this=exp.Sub(this=count, expression=exp.Literal.number(offset)),
            expressions=[exp.Literal.number(0)],
        )
    value = exp.Least(this=count, expressions=[exp.Literal.number(limit)])
    name = item.args["alias"].copy() if isinstance(item, exp.Alias) else exp.to_identifier("count")
    out = exp.Select(
        expressions=[exp.Alias(this=value, alias=name)], from_=inner.args["from_"].copy()
    )
    if inner.args.get("where") is not None:
        out.set("where", inner.args["where"].copy())
    return out


def exists(logical: Logical) -> Logical:
    """A rewritten probe with its ``count(...) > 0`` tests made existence tests (an aggregate
    ``exists`` of the same count: true when the noisy count rounds to at least 1,
    :func:`rewriter.domaincheck.exists`)."""
    from .plan import AggRef, Compare, Const, transform

    def fix(x: object) -> object | None:
        if (
            isinstance(x, Compare)
            and x.op == ">"
            and isinstance(x.left, AggRef)
            and x.left.func == "count"
            and isinstance(x.right, Const)
            and x.right.value == 0
        ):
            return dataclasses.replace(x.left, func="exists", pg_type="bool")
        return None

    def fixed(e: PostExpr) -> PostExpr:
        return transform(e, fix)

    return dataclasses.replace(
        logical,
        outputs=tuple(fixed(e) for e in logical.outputs),
        having=None if logical.having is None else fixed(logical.having),
    )


def zero_rows(table: TableDecl, columns: tuple[OutputColumn, ...], sql: str) -> Logical:
    """A zero-row probe as a statement of public values with no group: its columns and no
    rows, wherever a DP statement may stand (psqlODBC's ``DECLARE ... CURSOR WITH HOLD FOR
    SELECT * FROM t WHERE 1=0``, ``COPY``, ``PREPARE``)."""
    from .plan import Logical

    return Logical(
        table=table,
        columns=columns,
        outputs=(),
        where=None,
        group_by=(),
        measures=(),
        having=None,
        order_by=(),
        limit=0,
        offset=None,
        param_types=(),
        attributes=frozenset(),
        template=" ".join(sql.split()),
        bindings=(),
        zero_rows=True,
    )


__all__ = ["exists", "rewrite", "zero_rows"]
