"""Normalise an accepted SELECT over a protected table into a sqlglot-free logical query.

Resolves quoted, schema- and three-part names and table aliases, folds unquoted identifiers to
lower case, resolves ``GROUP BY 1`` and output aliases, strips harmless casts, reads literals
and ``$n`` parameters, and checks every node against an allowlist. The result, a
:class:`Logical`, still holds parameters; :mod:`rewriter.reduce` binds and reduces it.

>>> import sqlglot
>>> from rewriter.schema import load_schema
>>> adult = load_schema("sql_fixtures/adult/lapras.toml").tables["adult"]
>>> sel = sqlglot.parse_one('SELECT "sex", COUNT(1) AS n FROM adult a WHERE a.age::int > 30 GROUP BY 1', read="postgres")
>>> q = normalise(sel, adult, sel.args["from_"].this)
>>> q.group_by, [(c.name, c.type_oid) for c in q.columns], q.template
(('sex',), [('sex', 25), ('n', 20)], 'SELECT sex, count(*) FROM public.adult WHERE age > $1 GROUP BY sex')
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TypeAlias

from sqlglot import exp

from .errors import InvalidValueError, UndefinedColumnError, UnsupportedError
from .plan import (
    AggRef,
    Arith,
    Compare,
    Const,
    KeyRef,
    Logic,
    Measure,
    MeasureKind,
    OrderItem,
    OutputColumn,
    PostExpr,
)
from .schema import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    TEXT_TYPES,
    TYPE_OIDS,
    AttributeDecl,
    Kind,
    TableDecl,
)


class GroupingError(UnsupportedError):
    """A selected column is neither grouped nor inside an aggregate (42803)."""

    sqlstate = "42803"


@dataclass(frozen=True, slots=True)
class Param:
    """Parameter ``$n`` (``index`` = n - 1)."""

    index: int


Value: TypeAlias = object  # a Python literal value or a Param


# --- predicates (sqlglot-free) --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PCmp:
    attribute: str
    op: str
    value: Value


@dataclass(frozen=True, slots=True)
class PIsNull:
    attribute: str


@dataclass(frozen=True, slots=True)
class PBool:
    """A bare boolean column."""

    attribute: str


@dataclass(frozen=True, slots=True)
class PConst:
    value: bool | None


@dataclass(frozen=True, slots=True)
class PLogic:
    op: str  # and, or, not
    args: tuple[Pred, ...]


Pred: TypeAlias = PCmp | PIsNull | PBool | PConst | PLogic


@dataclass(frozen=True, slots=True, kw_only=True)
class Logical:
    """A normalised DP statement (may still contain :class:`Param` values)."""

    table: TableDecl = field(repr=False)
    columns: tuple[OutputColumn, ...]
    outputs: tuple[PostExpr, ...]
    where: Pred | None
    group_by: tuple[str, ...]
    measures: tuple[Measure, ...]
    having: PostExpr | None
    order_by: tuple[OrderItem, ...]
    limit: Value | None
    offset: Value | None
    param_types: tuple[int, ...]
    attributes: frozenset[str]
    template: str
    bindings: tuple[Value, ...]
    zero_rows: bool = False


ALLOWED = (
    exp.Select, exp.From, exp.Table, exp.TableAlias, exp.Identifier, exp.Column, exp.Star,
    exp.Alias, exp.Count, exp.Sum, exp.Avg, exp.Where, exp.Group, exp.Having, exp.Order,
    exp.Ordered, exp.Limit, exp.Offset, exp.Literal, exp.Boolean, exp.Null, exp.Parameter,
    exp.Placeholder, exp.Cast, exp.DataType, exp.DataTypeParam, exp.EQ, exp.NEQ, exp.GT,
    exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Not, exp.And, exp.Or, exp.Paren,
    exp.Is, exp.Neg, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Var,
)  # fmt: skip

_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_ARITH: dict[type[exp.Expression], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}

_DTYPES: dict[str, str] = {
    "INT": "int4", "SMALLINT": "int2", "BIGINT": "int8", "DECIMAL": "numeric", "TEXT": "text",
    "VARCHAR": "varchar", "CHAR": "bpchar", "BOOLEAN": "bool", "DATE": "date", "DOUBLE": "float8",
    "FLOAT": "float4", "BPCHAR": "bpchar",
}  # fmt: skip


def cast_type(node: exp.Cast) -> str | None:
    """Canonical PostgreSQL type name of a cast target, if it is one we understand."""
    to = node.args.get("to")
    if not isinstance(to, exp.DataType):
        return None
    name = to.this.name if hasattr(to.this, "name") else str(to.this)
    return _DTYPES.get(str(name).upper())


def ident(node: exp.Identifier | str | None) -> str:
    """PostgreSQL's folding: unquoted identifiers are lower-cased."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.lower()
    return str(node.this) if node.quoted else str(node.this).lower()


def _unsupported(what: str, table: TableDecl, hint: str | None = None) -> UnsupportedError:
    return UnsupportedError(
        f"{what} is not supported over protected table {table.name}; "
        "only COUNT(*)/COUNT(col)/SUM(col)/AVG(col) over declared columns are answered",
        hint=hint,
    )


@dataclass
class _Builder:
    table: TableDecl
    aliases: frozenset[str]
    params: dict[int, int] = field(default_factory=dict)
    measures: list[Measure] = field(default_factory=list)
    attrs: set[str] = field(default_factory=set)

    # -- names --
    def column(self, node: exp.Column) -> str:
        if isinstance(node.this, exp.Star):
            raise _unsupported("a star", self.table)
        qual = [
            ident(node.args.get(k))
            for k in ("catalog", "db", "table")
            if node.args.get(k) is not None
        ]
        if qual:
            if qual[-1] not in self.aliases:
                raise UndefinedColumnError(
                    f"missing FROM-clause entry for a qualifier of a column of {self.table.name}",
                    hint=f"qualify columns with the table name {self.table.name} or its alias",
                )
            if len(qual) >= 2 and qual[-2] != self.table.schema:
                raise UndefinedColumnError(
                    f"column qualifier does not name protected table {self.table.qualified}"
                )
        name = (
            ident(node.this if isinstance(node.this, exp.Identifier) else None) or node.name.lower()
        )
        if self.table.column_type(name) is None:
            raise UndefinedColumnError(
                f"column {name} does not exist in protected table {self.table.name}"
                if name.isidentifier() and len(name) <= 63
                else f"unknown column in protected table {self.table.name}",
                hint=f"declared columns: {', '.join(c for c, _ in self.table.columns)}",
            )
        return name

    def attribute(self, name: str) -> AttributeDecl:
        attr = self.table.attributes.get(name)
        if attr is None:
            raise UnsupportedError(
                f"column {name} of protected table {self.table.name} has no public domain",
                hint=f"declare an attribute for {name} in lapras.toml, or query only declared attributes: "
                + ", ".join(self.table.attributes),
            )
        self.attrs.add(name)
        return attr

    def strip_cast(self, node: exp.Expression) -> tuple[exp.Expression, str | None]:
        """Strip casts and parentheses; return the inner node and the outermost cast type."""
        outer: str | None = None
        while isinstance(node, exp.Cast | exp.Paren):
            if isinstance(node, exp.Cast):
                t = cast_type(node)
                if t is None:
                    raise _unsupported("a cast to this type", self.table)
                outer = outer or t
            node = node.this
        return node, outer

    def attr_ref(
        self, node: exp.Expression, *, output: bool = False
    ) -> tuple[AttributeDecl, str] | None:
        """An attribute reference (possibly under harmless casts) and its output type.

        ``output``: the reference is a group key (select list, GROUP BY, ORDER BY), where a
        cast to text is a one-to-one relabelling of the groups and is accepted too."""
        inner, cast = self.strip_cast(node)
        if not isinstance(inner, exp.Column):
            return None
        attr = self.attribute(self.column(inner))
        if cast is not None:
            ok = (
                (attr.pg_type in INTEGER_TYPES and cast in INTEGER_TYPES | {"numeric"})
                or (attr.pg_type in TEXT_TYPES and cast in TEXT_TYPES)
                or cast == attr.pg_type
                or (output and cast in TEXT_TYPES)
            )
            if not ok:
                raise _unsupported("a cast that changes how a column compares", self.table,
                                   hint="casts are accepted between integer types and between text types")  # fmt: skip
        return attr, cast or attr.pg_type

    # -- values --
    def value(self, node: exp.Expression, attr: AttributeDecl | None) -> Value:
        inner, cast = self.strip_cast(node)
        neg = False
        while isinstance(inner, exp.Neg):
            neg = not neg
            inner, c2 = self.strip_cast(inner.this)
            cast = cast or c2
        if isinstance(inner, exp.Parameter | exp.Placeholder):
            idx = self.param_index(inner)
            if neg:
                raise _unsupported("a negated parameter", self.table)
            if attr is not None and not self.params.get(idx):
                self.params[idx] = TYPE_OIDS.get(attr.pg_type, 0)
            v: Value = Param(idx)
        elif isinstance(inner, exp.Null):
            v = None
        elif isinstance(inner, exp.Boolean):
            v = bool(inner.this)
        elif isinstance(inner, exp.Literal):
            if inner.is_string:
                v = str(inner.this)
                if cast in INTEGER_TYPES | {"numeric"} | FLOAT_TYPES:
                    v = _number(v)
                elif cast == "date":
                    v = _date(v)
            else:
                v = _number(str(inner.this))
            if neg:
                if not isinstance(v, Fraction):
                    raise InvalidValueError("invalid input for unary minus")
                v = -v
        else:
            raise _unsupported(f"an expression of type {type(inner).__name__}", self.table,
                               hint="compare declared columns with constants or $n parameters")  # fmt: skip
        return v

    def param_index(self, node: exp.Expression) -> int:
        raw = node.this.this if isinstance(node.this, exp.Literal) else node.name
        try:
            n = int(str(raw))
        except ValueError:
            raise _unsupported("a named parameter", self.table, hint="use $1, $2, ...") from None
        if n < 1:
            raise _unsupported("parameter $0", self.table)
        self.params.setdefault(n - 1, 0)
        return n - 1

    # -- predicates --
    def pred(self, node: exp.Expression) -> Pred:
        if isinstance(node, exp.Paren):
            return self.pred(node.this)
        if isinstance(node, exp.And | exp.Or):
            op = "and" if isinstance(node, exp.And) else "or"
            return PLogic(op, (self.pred(node.this), self.pred(node.expression)))
        if isinstance(node, exp.Not):
            return PLogic("not", (self.pred(node.this),))
        if isinstance(node, exp.Boolean):
            return PConst(bool(node.this))
        if isinstance(node, exp.Null):
            return PConst(None)
        cmp_op = _OPS.get(type(node))
        if cmp_op is not None:
            op = cmp_op
            left, right = node.this, node.expression
            la, ra = self._maybe_attr(left), self._maybe_attr(right)
            if la is not None and ra is None:
                return PCmp(la.name, op, self.value(right, la))
            if ra is not None and la is None:
                return PCmp(ra.name, _FLIP[op], self.value(left, ra))
            if la is None and ra is None:
                return PConst(
                    _const_compare(op, self.value(left, None), self.value(right, None), self.table)
                )
            raise _unsupported("a comparison between two columns", self.table)
        if isinstance(node, exp.Between):
            attr = self._need_attr(node.this)
            lo, hi = self.value(node.args["low"], attr), self.value(node.args["high"], attr)
            if node.args.get("symmetric"):
                a = PLogic("and", (PCmp(attr.name, ">=", lo), PCmp(attr.name, "<=", hi)))
                b = PLogic("and", (PCmp(attr.name, ">=", hi), PCmp(attr.name, "<=", lo)))
                return PLogic("or", (a, b))
            return PLogic("and", (PCmp(attr.name, ">=", lo), PCmp(attr.name, "<=", hi)))
        if isinstance(node, exp.In):
            if (
                node.args.get("query") is not None
                or node.args.get("unnest") is not None
                or node.args.get("field") is not None
            ):
                raise _unsupported("IN with a subquery", self.table)
            attr = self._need_attr(node.this)
            items = node.expressions
            if not items:
                raise _unsupported("an empty IN list", self.table)
            return PLogic("or", tuple(PCmp(attr.name, "=", self.value(e, attr)) for e in items))
        if isinstance(node, exp.Is):
            target = node.expression
            attr = self._need_attr(node.this)
            if isinstance(target, exp.Null):
                p: Pred = PIsNull(attr.name)
            elif isinstance(target, exp.Boolean) and attr.kind is Kind.BOOLEAN:
                # x IS TRUE: true when x is true, false otherwise (never NULL)
                # x IS TRUE: the comparison with unknown mapped to false (never NULL)
                cmp = PCmp(attr.name, "=", bool(target.this))
                p = PLogic("and", (PLogic("not", (PIsNull(attr.name),)), cmp))
            else:
                raise _unsupported("this IS test", self.table)
            return PLogic("not", (p,)) if node.args.get("negate") else p
        if isinstance(node, exp.Column | exp.Cast):
            attr = self._need_attr(node)
            if attr.kind is not Kind.BOOLEAN:
                raise _unsupported("a non-boolean column used as a condition", self.table)
            return PBool(attr.name)
        if isinstance(node, exp.Literal) and not node.is_string:
            raise _unsupported("a number used as a condition", self.table)
        raise _unsupported(f"a condition of type {type(node).__name__}", self.table,
                           hint="accepted: =, <>, <, <=, >, >=, BETWEEN, IN, NOT IN, IS [NOT] NULL, AND, OR, NOT")  # fmt: skip

    def _maybe_attr(self, node: exp.Expression) -> AttributeDecl | None:
        ref = self.attr_ref(node)
        return None if ref is None else ref[0]

    def _need_attr(self, node: exp.Expression) -> AttributeDecl:
        ref = self.attr_ref(node)
        if ref is None:
            raise _unsupported("a condition that is not on a declared column", self.table,
                               hint="write conditions as <column> <op> <constant>")  # fmt: skip
        return ref[0]

    # -- aggregates --
    def measure(self, m: Measure) -> int:
        if m not in self.measures:
            self.measures.append(m)
        return self.measures.index(m)

    def aggregate(self, node: exp.Expression) -> AggRef | None:
        if not isinstance(node, exp.Count | exp.Sum | exp.Avg):
            return None
        arg = node.this
        if isinstance(arg, exp.Distinct):
            raise _unsupported("an aggregate over DISTINCT", self.table)
        if node.args.get("expressions"):
            raise _unsupported("an aggregate with several arguments", self.table)
        if isinstance(node, exp.Count):
            if isinstance(arg, exp.Star) or arg is None:
                return AggRef(
                    func="count",
                    value=self.measure(Measure(kind=MeasureKind.COUNT_STAR)),
                    pg_type="int8",
                )
            inner, _ = self.strip_cast(arg)
            if isinstance(inner, exp.Literal | exp.Boolean):
                return AggRef(
                    func="count",
                    value=self.measure(Measure(kind=MeasureKind.COUNT_STAR)),
                    pg_type="int8",
                )
            if isinstance(inner, exp.Null):
                raise _unsupported("COUNT(NULL)", self.table)
            attr = self._need_attr(arg)
            kind = MeasureKind.COUNT if attr.nullable else MeasureKind.COUNT_STAR
            return AggRef(
                func="count",
                value=self.measure(
                    Measure(kind=kind, attribute=attr.name if attr.nullable else None)
                ),
                pg_type="int8",
            )
        func = "sum" if isinstance(node, exp.Sum) else "avg"
        inner, cast = self.strip_cast(arg)
        if isinstance(inner, exp.Literal) and not inner.is_string:
            k = _number(str(inner.this))
            if k.denominator != 1:
                raise _unsupported(f"{func.upper()} of a non-integer constant", self.table)
            count = self.measure(Measure(kind=MeasureKind.COUNT_STAR))
            pg = "int8" if func == "sum" else "numeric"
            return AggRef(func=func, value=count, count=count, scale=int(k), pg_type=pg)
        attr = self._need_attr(arg)
        argtype = cast or attr.pg_type
        if attr.kind is not Kind.INTEGER:
            raise _unsupported(f"{func.upper()} over a non-integer column", self.table,
                               hint="SUM and AVG are answered over integer attributes with unit bins")  # fmt: skip
        if not attr.unit_bins:
            raise _unsupported(f"{func.upper()}({attr.name}) over a binned column", self.table,
                               hint=f"{attr.name} is declared with bins wider than one value; SUM/AVG need unit bins")  # fmt: skip
        s = self.measure(Measure(kind=MeasureKind.SUM, attribute=attr.name))
        c = self.measure(
            Measure(kind=MeasureKind.COUNT, attribute=attr.name)
            if attr.nullable
            else Measure(kind=MeasureKind.COUNT_STAR)
        )
        if func == "sum":
            pg = "int8" if argtype in ("int2", "int4") else "numeric"
            return AggRef(func="sum", value=s, count=c, pg_type=pg)
        return AggRef(func="avg", value=s, count=c, pg_type="numeric")


def _number(text: str) -> Fraction:
    try:
        return Fraction(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        raise InvalidValueError(
            "invalid input syntax for a number", hint="compare integer columns with numbers"
        ) from None


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidValueError(
            "invalid input syntax for type date", hint="write dates as 'YYYY-MM-DD'"
        ) from None


def _const_compare(op: str, a: Value, b: Value, table: TableDecl) -> bool | None:
    if isinstance(a, Param) or isinstance(b, Param):
        raise _unsupported("a condition on a parameter alone", table)
    if a is None or b is None:
        return None
    if isinstance(a, str) and isinstance(b, Fraction):
        a = _number(a)
    if isinstance(b, str) and isinstance(a, Fraction):
        b = _number(b)
    if type(a) is not type(b):
        raise _unsupported("a comparison between constants of different types", table)
    return bool({
        "=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,  # type: ignore[operator]
    }[op])  # fmt: skip


# --- the statement ----------------------------------------------------------------------------

_AGG_NAMES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg"}


def has_aggregate(select: exp.Select) -> bool:
    return any(isinstance(n, exp.Count | exp.Sum | exp.Avg | exp.AggFunc) for n in select.walk())


def check_allowlist(select: exp.Select, table: TableDecl) -> None:
    for node in select.walk():
        if not isinstance(node, ALLOWED):
            name = type(node).__name__.upper()
            raise _unsupported(f"{name}", table)
    for key in (
        "distinct",
        "joins",
        "laterals",
        "with_",
        "with",
        "windows",
        "qualify",
        "into",
        "locks",
        "sample",
        "pivots",
    ):
        if select.args.get(key):
            raise _unsupported(key.rstrip("_").upper(), table)


def _output_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Alias):
        return ident(node.args["alias"])
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Cast):
        below = inner.this
        while isinstance(below, exp.Cast | exp.Paren):
            below = below.this
        if isinstance(below, exp.Column | exp.Count | exp.Sum | exp.Avg):
            return _output_name(below)
        t = cast_type(inner)
        return t or "?column?"
    if isinstance(inner, exp.Column):
        return ident(inner.this) if isinstance(inner.this, exp.Identifier) else inner.name.lower()
    for cls, name in _AGG_NAMES.items():
        if isinstance(inner, cls):
            return name
    if isinstance(inner, exp.Boolean):
        return "bool"
    return "?column?"


def _unalias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _int_literal(node: exp.Expression) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(str(node.this))
        except ValueError:
            return None
    return None


def normalise(select: exp.Select, table: TableDecl, table_node: exp.Table) -> Logical:
    """Normalise an accepted ``SELECT`` over ``table`` (already known to be the only table)."""
    check_allowlist(select, table)
    alias = table_node.args.get("alias")
    aliases = {table.name}
    if alias is not None and alias.this is not None:
        aliases = {ident(alias.this)}
    b = _Builder(table=table, aliases=frozenset(aliases))
    items = list(select.expressions)
    out_names = [_output_name(e) for e in items]
    for e in items:
        if isinstance(_unalias(e), exp.Star) or (
            isinstance(_unalias(e), exp.Column) and isinstance(_unalias(e).this, exp.Star)
        ):
            raise GroupingError(
                f"SELECT * cannot be combined with aggregates over protected table {table.name}"
            )

    # GROUP BY (input column names win over output aliases, as in PostgreSQL)
    group: list[AttributeDecl] = []
    gnode = select.args.get("group")
    if gnode is not None:
        if gnode.args.get("rollup") or gnode.args.get("cube") or gnode.args.get("grouping_sets"):
            raise _unsupported("ROLLUP/CUBE/GROUPING SETS", table)
        for g in gnode.expressions:
            target = g
            n = _int_literal(g)
            if n is not None:
                if not 1 <= n <= len(items):
                    raise UnsupportedError(f"GROUP BY position {n} is not in select list")
                target = _unalias(items[n - 1])
            elif isinstance(g, exp.Column) and not g.table:
                name = ident(g.this) if isinstance(g.this, exp.Identifier) else g.name.lower()
                if table.column_type(name) is None and name in out_names:
                    target = _unalias(items[out_names.index(name)])
            ref = b.attr_ref(target, output=True)
            if ref is None:
                raise _unsupported(
                    "GROUP BY over an expression", table, hint="group by declared columns"
                )
            attr = ref[0]
            if not attr.unit_bins:
                raise _unsupported(f"GROUP BY {attr.name} (declared with bins wider than one value)", table,
                                   hint=f"group by columns with unit bins; {attr.name} can be used in WHERE at bin edges")  # fmt: skip
            if attr not in group:
                group.append(attr)
    group_names = tuple(a.name for a in group)

    def post(node: exp.Expression, *, allow_params: bool = True) -> PostExpr:
        agg_node, cast = b.strip_cast(node)
        agg = b.aggregate(agg_node)
        if agg is not None:
            if cast is not None and cast != agg.pg_type:
                if cast not in INTEGER_TYPES | {"numeric", "float8", "float4"}:
                    raise _unsupported("a cast of an aggregate to this type", table)
                agg = AggRef(
                    func=agg.func, value=agg.value, count=agg.count, scale=agg.scale, pg_type=cast
                )
            return agg
        if isinstance(node, exp.Paren):
            return post(node.this)
        ref = b.attr_ref(node, output=True) if isinstance(agg_node, exp.Column) else None
        if ref is not None:
            attr, typ = ref
            if attr.name not in group_names:
                raise GroupingError(
                    f"column {attr.name} must appear in the GROUP BY clause or be used in an aggregate function"
                )
            return KeyRef(index=group_names.index(attr.name), pg_type=typ)
        op = _OPS.get(type(node))
        if op is not None:
            return Compare(op=op, left=post(node.this), right=post(node.expression))
        aop = _ARITH.get(type(node))
        if aop is not None:
            return Arith(op=aop, left=post(node.this), right=post(node.expression))
        if isinstance(node, exp.And | exp.Or):
            return Logic(
                op="and" if isinstance(node, exp.And) else "or",
                args=(post(node.this), post(node.expression)),
            )
        if isinstance(node, exp.Not):
            return Logic(op="not", args=(post(node.this),))
        if isinstance(
            node,
            exp.Literal
            | exp.Boolean
            | exp.Null
            | exp.Neg
            | exp.Parameter
            | exp.Placeholder
            | exp.Cast,
        ):
            v = b.value(node, None)
            if isinstance(v, Fraction):
                v = int(v) if v.denominator == 1 else Decimal(v.numerator) / Decimal(v.denominator)
            return Const(value=v)
        raise _unsupported(
            f"an expression of type {type(node).__name__} in the select list, HAVING or ORDER BY",
            table,
        )

    outputs: list[PostExpr] = []
    columns: list[OutputColumn] = []
    for e, name in zip(items, out_names, strict=True):
        inner = _unalias(e)
        pe = post(inner)
        if isinstance(pe, KeyRef | AggRef):
            typ = pe.pg_type
        else:
            raise _unsupported("a select-list item that is neither a grouped column nor an aggregate", table,
                               hint="select grouped columns and COUNT/SUM/AVG aggregates")  # fmt: skip
        outputs.append(pe)
        columns.append(OutputColumn(name=name, type_oid=TYPE_OIDS.get(typ, 0)))

    where_node = select.args.get("where")
    where = b.pred(where_node.this) if where_node is not None else None

    having_node = select.args.get("having")
    having = post(having_node.this) if having_node is not None else None

    order: list[OrderItem] = []
    onode = select.args.get("order")
    if onode is not None:
        for o in onode.expressions:
            expr = o.this
            n = _int_literal(expr)
            if n is not None:
                if not 1 <= n <= len(items):
                    raise UnsupportedError(f"ORDER BY position {n} is not in select list")
                pe = outputs[n - 1]
            elif (
                isinstance(expr, exp.Column) and not expr.table and _output_name(expr) in out_names
            ):
                pe = outputs[out_names.index(_output_name(expr))]
            else:
                pe = post(expr)
            nf = o.args.get("nulls_first")
            desc = bool(o.args.get("desc"))
            # sqlglot marks the default explicitly: only keep it when it differs from PG's
            order.append(
                OrderItem(expr=pe, desc=desc, nulls_first=bool(nf) if nf is not None else None)
            )

    def bound(key: str) -> Value | None:
        node = select.args.get(key)
        if node is None:
            return None
        e = node.args.get("expression") or node.this
        if isinstance(e, exp.Var) and e.name.upper() == "ALL":
            return None
        v = b.value(e, None)
        if isinstance(v, Param):
            b.params[v.index] = 20
            return v
        if v is None:
            return None
        if not isinstance(v, Fraction) or v.denominator != 1 or v < 0:
            raise InvalidValueError(f"{key.upper()} must be a non-negative integer")
        return int(v)

    limit = bound("limit")
    offset = bound("offset")
    if not b.measures:
        raise _unsupported(
            "GROUP BY without an aggregate", table, hint="add COUNT(*) to the select list"
        )

    nparams = max(b.params) + 1 if b.params else 0
    template, bindings = make_template(
        table, outputs, where, group_names, b.measures, having, order
    )
    return Logical(
        table=table,
        columns=tuple(columns),
        outputs=tuple(outputs),
        where=where,
        group_by=group_names,
        measures=tuple(b.measures),
        having=having,
        order_by=tuple(order),
        limit=limit,
        offset=offset,
        param_types=tuple(b.params.get(i, 0) for i in range(nparams)),
        attributes=frozenset(b.attrs),
        template=template,
        bindings=tuple(bindings),
    )


def _fmt_value(v: Value, bindings: list[Value]) -> str:
    if isinstance(v, Fraction):
        v = int(v) if v.denominator == 1 else Decimal(v.numerator) / Decimal(v.denominator)
    bindings.append(v)
    return f"${len(bindings)}"


def _fmt_pred(p: Pred, b: list[Value]) -> str:
    if isinstance(p, PCmp):
        return f"{p.attribute} {p.op} {_fmt_value(p.value, b)}"
    if isinstance(p, PIsNull):
        return f"{p.attribute} IS NULL"
    if isinstance(p, PBool):
        return p.attribute
    if isinstance(p, PConst):
        return {True: "TRUE", False: "FALSE", None: "NULL"}[p.value]
    if p.op == "not":
        return f"NOT ({_fmt_pred(p.args[0], b)})"
    return "(" + f" {p.op.upper()} ".join(_fmt_pred(a, b) for a in p.args) + ")"


def _fmt_post(e: PostExpr, group: tuple[str, ...], measures: list[Measure], b: list[Value]) -> str:
    if isinstance(e, KeyRef):
        return group[e.index]
    if isinstance(e, AggRef):
        m = measures[e.value]
        arg = "*" if m.attribute is None else m.attribute
        if e.func == "count":
            return f"count({arg})"
        if m.kind is MeasureKind.COUNT_STAR:
            return f"{e.func}({e.scale})"
        return f"{e.func}({arg})"
    if isinstance(e, Const):
        return _fmt_value(e.value, b)
    if isinstance(e, Compare | Arith):
        return f"({_fmt_post(e.left, group, measures, b)} {e.op} {_fmt_post(e.right, group, measures, b)})"
    if e.op == "not":
        return f"NOT ({_fmt_post(e.args[0], group, measures, b)})"
    return "(" + f" {e.op.upper()} ".join(_fmt_post(a, group, measures, b) for a in e.args) + ")"


def make_template(
    table: TableDecl,
    outputs: list[PostExpr],
    where: Pred | None,
    group: tuple[str, ...],
    measures: list[Measure],
    having: PostExpr | None,
    order: list[OrderItem],
) -> tuple[str, list[Value]]:
    """Template text of the normalised statement (literals -> ``$n``) and its bindings.

    Printed from the normalised form, so it is stable across spacing, case, quoting, table
    and output aliases, ``GROUP BY 1`` and casts. LIMIT/OFFSET are post-processing and
    not part of the template.
    """
    b: list[Value] = []
    sel = ", ".join(_fmt_post(o, group, measures, []) for o in outputs)
    text = f"SELECT {sel} FROM {table.qualified}"
    if where is not None:
        text += " WHERE " + _fmt_pred(where, b)
    if group:
        text += " GROUP BY " + ", ".join(group)
    if having is not None:
        text += " HAVING " + _fmt_post(having, group, measures, b)
    if order:
        text += " ORDER BY " + ", ".join(
            _fmt_post(o.expr, group, measures, [])
            + (" DESC" if o.desc else "")
            + (
                ""
                if o.nulls_first is None
                else (" NULLS FIRST" if o.nulls_first else " NULLS LAST")
            )
            for o in order
        )
    return text, b
