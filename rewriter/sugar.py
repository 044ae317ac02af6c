"""Forms PostgreSQL reads as plainer ones, written out before a statement over a protected
table is read (pure; in place):

- ``x op ANY (ARRAY[a, b])`` and ``x op ANY ('{a,b}'::T[])`` (asyncpg's and psycopg's lists,
  ``LIKE ANY``) as ``(x op a OR x op b)``; ``ALL`` as ``AND``; an empty array as ``false``
  (``ANY``) or ``true`` (``ALL``);
- row comparisons ``(a, b) = (1, 2)`` as ``a = 1 AND b = 2`` (``<>``: ``a <> 1 OR b <> 2``),
  and ``(a, b) IN ((1, 2), (3, 4))`` as ``(a = 1 AND b = 2) OR (a = 3 AND b = 4)``.

Each gives the value PostgreSQL gives, NULL included: PostgreSQL defines ``ANY``/``ALL`` over
an array and a row comparison by exactly these ORs and ANDs of three-valued logic. An array
that is not a list of constants (``ANY ($1)``, a nested array) is left as written and refused
where it is read.
"""

from __future__ import annotations

from sqlglot import exp

from .pgtypes import array_elements

#: The operators an ANY/ALL may follow.
_QUANTIFIED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)


def expand(tree: exp.Expr) -> None:
    """Write out ``tree``'s ANY/ALL over constant arrays and its row comparisons, in place."""
    tree.transform(_expanded, copy=False)


def _expanded(node: exp.Expression) -> exp.Expression:
    if isinstance(node, _QUANTIFIED):
        quantified = _quantifier(node.expression)
        if quantified is not None:
            every, array = quantified
            items = _items(array)
            if items is None:
                return node
            if not items:
                return exp.true() if every else exp.false()
            parts = [node.__class__(this=node.this.copy(), expression=i) for i in items]
            return exp.Paren(this=exp.and_(*parts) if every else exp.or_(*parts))
        if isinstance(node, exp.EQ | exp.NEQ):
            pairs = _pairs(node.this, node.expression)
            if pairs is not None:
                if isinstance(node, exp.EQ):
                    return exp.Paren(
                        this=exp.and_(*(exp.EQ(this=a, expression=b) for a, b in pairs))
                    )
                return exp.Paren(this=exp.or_(*(exp.NEQ(this=a, expression=b) for a, b in pairs)))
    if (
        isinstance(node, exp.In)
        and isinstance(node.this, exp.Tuple)
        and node.expressions
        and not any(node.args.get(k) is not None for k in ("query", "unnest", "field"))
    ):
        rows = [_pairs(node.this, row) for row in node.expressions]
        if all(r is not None for r in rows):
            return exp.Paren(
                this=exp.or_(
                    *(
                        exp.Paren(this=exp.and_(*(exp.EQ(this=a, expression=b) for a, b in r)))
                        for r in rows
                        if r is not None
                    )
                )
            )
    return node


def over_parameter(tree: exp.Expr) -> bool:
    """Whether ``tree`` has an ANY/ALL over a ``$n`` parameter (``x = ANY($1)``): it is
    written out when the statement is executed, with the array bound (rewriter.compose)."""
    for node in tree.find_all(*_QUANTIFIED):
        quantified = _quantifier(node.expression)
        if quantified is not None:
            array = quantified[1]
            while isinstance(array, exp.Paren | exp.Cast):
                array = array.this
            if isinstance(array, exp.Placeholder | exp.Parameter):
                return True
    return False


def _quantifier(node: exp.Expression) -> tuple[bool, exp.Expression] | None:
    """(whether ALL, the array) of ``ANY (array)`` / ``ALL (array)``; None otherwise."""
    if isinstance(node, exp.Any | exp.All):
        return isinstance(node, exp.All), node.this
    if (
        isinstance(node, exp.Anonymous)
        and node.name.upper() in ("ALL", "ANY", "SOME")
        and len(node.expressions) == 1
    ):
        return node.name.upper() == "ALL", node.expressions[0]
    return None


def _items(node: exp.Expression) -> list[exp.Expression] | None:
    """The elements of an array of constants: ``ARRAY[...]`` or a ``'{...}'::T[]`` literal."""
    while isinstance(node, exp.Paren):
        node = node.this
    if (
        isinstance(node, exp.Cast)
        and isinstance(node.this, exp.Array)
        and isinstance(node.to, exp.DataType)
        and node.to.is_type(exp.DType.ARRAY)
        and len(node.to.expressions) == 1
    ):  # ARRAY[...]::T[]: each element cast to T
        inner = _items(node.this)
        element = node.to.expressions[0]
        return None if inner is None else [exp.Cast(this=e, to=element.copy()) for e in inner]
    if isinstance(node, exp.Array):
        if any(isinstance(e, exp.Array) for e in node.expressions):
            return None
        return [e.copy() for e in node.expressions]
    if (
        isinstance(node, exp.Cast)
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
        and isinstance(node.to, exp.DataType)
        and node.to.is_type(exp.DType.ARRAY)
        and len(node.to.expressions) == 1
    ):
        texts = array_elements(str(node.this.this))
        if texts is None:
            return None
        element = node.to.expressions[0]
        return [
            exp.Null() if t is None else exp.Cast(this=exp.Literal.string(t), to=element.copy())
            for t in texts
        ]
    return None


def _pairs(
    left: exp.Expression, right: exp.Expression
) -> list[tuple[exp.Expression, exp.Expression]] | None:
    """The element pairs of two row values of one length; None when they are not that."""
    if not (isinstance(left, exp.Tuple) and isinstance(right, exp.Tuple)):
        return None
    if len(left.expressions) != len(right.expressions):
        return None
    return [(a.copy(), b.copy()) for a, b in zip(left.expressions, right.expressions, strict=True)]
