"""``SELECT DISTINCT ON (k...) ...`` over a protected table, as post-processing of its rows.

PostgreSQL keeps, of the rows the statement would return, the first of each group of equal
``k`` values in the ``ORDER BY``'s order (an arbitrary one without ``ORDER BY``): the top row
per group (``SELECT DISTINCT ON (sex) sex, race, count(*) ... GROUP BY sex, race ORDER BY
sex, count(*) DESC``: each sex's largest race). Over a grouped result that is a computation
on the released rows, written here in SQL the composition answers (rewriter.compose,
docs/sql.md §2.6)::

    SELECT lapras_c1 AS <name 1>, ... FROM (
        SELECT <items>, <item 1> AS lapras_c1, ..., <order 1> AS lapras_o1, ...,
               row_number() OVER (PARTITION BY k... ORDER BY <order>...) AS lapras_rn
        FROM ... WHERE ... GROUP BY ... HAVING ...) AS lapras_distinct_on
    WHERE lapras_rn = 1 ORDER BY lapras_o1, ... LIMIT ... OFFSET ...

Guarantee: the inner statement is one DP statement, answered (charged and stored) as any
other; the window and the outer filter, order and limit only post-process its noisy rows, at
no further cost. ``k`` and the ``ORDER BY`` may name output columns by name or position, as
PostgreSQL allows; ``DISTINCT ON`` expressions that are not the leftmost ``ORDER BY`` items
are refused with PostgreSQL's 42P10.
"""

from __future__ import annotations

from sqlglot import exp

from .errors import UnsupportedError
from .names import ident, output_name, unalias

#: The names the rewritten statement gives its own columns (never an output name).
_PREFIX = "lapras_"


def split(tree: exp.Expr) -> exp.Select | None:
    """The statement rewritten as above, or None when ``tree`` has no ``DISTINCT ON``."""
    if not isinstance(tree, exp.Select):
        return None
    distinct = tree.args.get("distinct")
    if not isinstance(distinct, exp.Distinct) or distinct.args.get("on") is None:
        return None
    items = list(tree.expressions)
    if any(i.is_star for i in items):
        raise UnsupportedError(
            "DISTINCT ON with * in the select list is not supported",
            hint="name the columns of the select list",
        )
    on_node = distinct.args["on"]
    keys = [_resolved(k, items) for k in on_node.expressions]
    onode = tree.args.get("order")
    order = list(onode.expressions) if onode is not None else []
    ordered = [_resolved(o.this, items) for o in order]
    _check_leftmost(keys, ordered)

    inner = tree.copy()
    for key in ("distinct", "order", "limit", "offset"):
        inner.set(key, None)
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=[k.copy() for k in keys],
        order=exp.Order(
            expressions=[
                o.__class__(**{**o.args, "this": e.copy()})
                for o, e in zip(order, ordered, strict=True)
            ]
        )
        if order
        else None,
    )
    inner.set(
        "expressions",
        [i.copy() for i in items]  # as written: GROUP BY may name them by alias or position
        + [exp.alias_(unalias(i).copy(), f"{_PREFIX}c{n}") for n, i in enumerate(items, 1)]
        + [exp.alias_(e.copy(), f"{_PREFIX}o{n}") for n, e in enumerate(ordered, 1)]
        + [exp.alias_(window, f"{_PREFIX}rn")],
    )
    outer = exp.select(
        *(
            exp.alias_(exp.column(f"{_PREFIX}c{n}"), exp.to_identifier(output_name(i), quoted=True))
            for n, i in enumerate(items, 1)
        )
    ).from_(
        exp.Subquery(
            this=inner, alias=exp.TableAlias(this=exp.to_identifier(f"{_PREFIX}distinct_on"))
        )
    )
    outer = outer.where(exp.EQ(this=exp.column(f"{_PREFIX}rn"), expression=exp.Literal.number(1)))
    if order:
        outer.set(
            "order",
            exp.Order(
                expressions=[
                    o.__class__(**{**o.args, "this": exp.column(f"{_PREFIX}o{n}")})
                    for n, o in enumerate(order, 1)
                ]
            ),
        )
    for key in ("limit", "offset"):
        if tree.args.get(key) is not None:
            outer.set(key, tree.args[key].copy())
    return outer


def _resolved(node: exp.Expression, items: list[exp.Expression]) -> exp.Expression:
    """An ORDER BY or DISTINCT ON expression with output positions and output names
    replaced by the select-list items they name (PostgreSQL's rules for ORDER BY)."""
    if isinstance(node, exp.Literal) and not node.is_string:
        n = int(str(node.this)) if str(node.this).isdigit() else 0
        if not 1 <= n <= len(items):
            err = UnsupportedError(f"ORDER BY position {node.this} is not in select list")
            err.sqlstate = "42P10"  # type: ignore[misc]
            raise err
        return unalias(items[n - 1])
    if isinstance(node, exp.Column) and not node.table:
        name = ident(node.this) if isinstance(node.this, exp.Identifier) else node.name.lower()
        named = [i for i in items if isinstance(i, exp.Alias) and output_name(i) == name]
        if len(named) == 1:
            return unalias(named[0])
    return node


def _check_leftmost(keys: list[exp.Expression], ordered: list[exp.Expression]) -> None:
    """PostgreSQL's rule: the ORDER BY's leftmost items are the DISTINCT ON expressions."""
    if not ordered:
        return
    texts = {k.sql() for k in keys}
    if any(o.sql() not in texts for o in ordered[: len(keys)]):
        err = UnsupportedError(
            "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"
        )
        err.sqlstate = "42P10"  # type: ignore[misc]
        raise err
