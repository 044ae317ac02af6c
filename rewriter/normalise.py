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

import contextvars
import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from sqlglot import exp

from . import intervals, pgeval, pgtime
from .errors import (
    ACCEPTED,
    InvalidValueError,
    RowAccessError,
    UndefinedColumnError,
    UnsupportedError,
    unit_column_error,
)
from .plan import (
    AggRef,
    Arith,
    AttrRef,
    Case,
    Cast,
    Compare,
    Const,
    Frame,
    Func,
    GroupingRef,
    KeyRef,
    Logic,
    Logical,
    Measure,
    MeasureKind,
    OrderItem,
    OutputColumn,
    Param,
    PBool,
    PCmp,
    PConst,
    PExpr,
    PIsNull,
    PLogic,
    PostExpr,
    Pred,
    Value,
    Window,
    evaluate_with,
    nodes,
    transform,
    typed_const,
)

__all__ = ["Logical", "Param", "normalise", "union_logical"]
from . import clamp
from . import lookups as lookups_
from .names import TRIMS, cast_type, ident, output_name, unalias
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


_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_ARITH: dict[type[exp.Expression], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
}  # fmt: skip

#: sqlglot function nodes evaluated by rewriter.pgeval, and their PostgreSQL names.
_FUNCS: dict[type[exp.Expression], str] = {
    exp.Floor: "floor", exp.Ceil: "ceil", exp.Round: "round", exp.Abs: "abs", exp.Sign: "sign",
    exp.Trunc: "trunc", exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length",
    exp.Substring: "substr", exp.WidthBucket: "width_bucket", exp.Greatest: "greatest",
    exp.Least: "least", exp.Trim: "btrim", exp.Concat: "concat", exp.Left: "left",
    exp.Right: "right", exp.Replace: "replace", exp.ConcatWs: "concat_ws",
    exp.Initcap: "initcap", exp.SplitPart: "split_part", exp.StrPosition: "position",
    exp.StartsWith: "starts_with", exp.Reverse: "reverse", exp.MD5: "md5",
    exp.Repeat: "repeat", exp.Ascii: "ascii", exp.Chr: "chr", exp.Pow: "power",
    exp.Sqrt: "sqrt", exp.Cbrt: "cbrt", exp.Exp: "exp", exp.Ln: "ln", exp.Log: "log",
    exp.Pi: "pi", exp.Degrees: "degrees", exp.Radians: "radians", exp.Sin: "sin",
    exp.Cos: "cos",
}  # fmt: skip

#: The arguments, in PostgreSQL's order, of nodes whose other arguments are sqlglot's own
#: (``initcap``'s delimiters, ``position``'s start) or are written in another order.
_FUNC_ARGS: dict[type[exp.Expression], tuple[str, ...]] = {
    exp.Initcap: ("this",), exp.StrPosition: ("this", "substr"),
    exp.Pad: ("this", "expression", "fill_pattern"), exp.Trim: ("this", "expression"),
}  # fmt: skip

#: The aggregates answered over a protected table (refusals' hints).
AGGREGATES = (
    "count(*), count(x), count(DISTINCT x), sum, avg, min, max, stddev, stddev_samp, "
    "stddev_pop, variance, var_samp, var_pop, percentile_cont, percentile_disc and mode, with "
    "FILTER (WHERE ...)"
)

#: Constructs named in SQL words in refusals (sqlglot's node names are not SQL).
_SQL_WORDS = {
    "withingroup": "WITHIN GROUP", "window": "a window function", "subquery": "a subquery",
    "exists": "EXISTS", "array": "an ARRAY", "any": "ANY", "all": "ALL", "tuple": "a row value",
    "interval": "an interval", "similarto": "SIMILAR TO", "regexplike": "a regular expression",
    "jsonextract": "a JSON operator", "jsonbextract": "a JSON operator", "bracket": "a subscript",
    "dot": "a field selection", "star": "*", "distinct": "DISTINCT", "filter": "FILTER",
    "timestamptrunc": "date_trunc", "extract": "EXTRACT", "anonymous": "this function",
    "bitwiseand": "&", "bitwiseor": "|", "bitwisexor": "#", "pow": "^", "collate": "COLLATE",
    "nullsafeeq": "IS NOT DISTINCT FROM", "nullsafeneq": "IS DISTINCT FROM", "escape": "ESCAPE",
    "dpipe": "||", "lateral": "LATERAL", "unnest": "unnest", "values": "VALUES",
    "groupconcat": "function string_agg()", "arrayagg": "function array_agg()",
    "jsonarrayagg": "function json_agg()", "jsonbarrayagg": "function jsonb_agg()",
    "jsonobjectagg": "function json_object_agg()",
}  # fmt: skip


def sql_words(node: exp.Expression) -> str:
    """How a refusal names a construct: SQL's own words, never a parser's node name."""
    if isinstance(node, exp.Anonymous):
        return f"function {node.name.lower()}()"
    word = _SQL_WORDS.get(node.key)
    if word is not None:
        return word
    if isinstance(node, exp.Func):
        try:  # the name PostgreSQL spells (sqlglot's node names are its own)
            name = node.sql(dialect="postgres").split("(", 1)[0].strip().lower()
        except Exception:
            name = ""
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            name = node.sql_name().lower()
        return f"function {name}()"
    return node.key.replace("_", " ").upper()


def cast_words(node: exp.Expression) -> str:
    """The target type of a cast as PostgreSQL names it (``money``, ``json``, ``uuid``)."""
    to = node.args.get("to")
    try:
        text = to.sql(dialect="postgres").lower() if isinstance(to, exp.Expression) else ""
    except Exception:
        text = ""
    return text if re.fullmatch(r"[a-z0-9_ ()\[\],.]{1,60}", text) else "this type"


#: The types a cast may name (refusals' hints).
CAST_TYPES = (
    "smallint, integer, bigint, numeric, real, double precision, text, varchar, char, boolean, "
    "date, timestamp, timestamp with time zone, interval"
)


def cast_typmod(node: exp.Cast) -> tuple[int, ...]:
    to = node.args.get("to")
    mods: list[int] = []
    if isinstance(to, exp.DataType):
        for p in to.expressions:
            lit = p.this if isinstance(p, exp.DataTypeParam) else p
            if not (isinstance(lit, exp.Literal) and not lit.is_string):
                raise UnsupportedError("a type modifier that is not a number")
            mods.append(int(str(lit.this)))
    return tuple(mods)


def _unsupported(what: str, table: TableDecl, hint: str | None = None) -> UnsupportedError:
    return UnsupportedError(
        f"{what} is not supported over protected table {table.name}", hint=hint or ACCEPTED
    )


def _cast_refusal(node: exp.Expression, table: TableDecl) -> UnsupportedError:
    words = cast_words(node)
    if re.fullmatch(r"time(\(\d+\))?( with(out)? time zone)?|timetz", words):
        return _unsupported(f"the type {words} (a time of day)", table,
                            hint="add an interval to the date instead: d + INTERVAL '12 hours' "
                            "(a timestamp); extract(hour FROM ts) reads the hour")  # fmt: skip
    return _unsupported(
        f"a cast to type {words}",
        table,
        hint=f"casts to {CAST_TYPES} are evaluated",
    )


#: sqlglot's nodes of PostgreSQL's justify_* functions, to their names.
_JUSTIFY: dict[type[exp.Expression], str] = {
    exp.JustifyDays: "justify_days",
    exp.JustifyHours: "justify_hours",
    exp.JustifyInterval: "justify_interval",
}

#: What to write instead of a construct the proxy does not evaluate (by sqlglot node key).
_INSTEAD = {
    "regexplike": "write LIKE or ILIKE patterns (% and _)",
    "regexpilike": "write LIKE or ILIKE patterns (% and _)",
    "similarto": "write LIKE patterns (% and _)",
    "any": "write IN (v1, v2, ...)",
    "all": "write NOT IN (v1, v2, ...), or compare with the largest value",
    "collate": "drop COLLATE: = and <> do not depend on the collation",
    "tuple": "compare the columns one by one: a = 1 AND b = 2",
    "array": "write IN (v1, v2, ...)",
    "bracket": "only scalar values of declared columns are evaluated",
    "dot": "only scalar values of declared columns are evaluated",
    "jsonextract": "only scalar values of declared columns are evaluated",
    "jsonbextract": "only scalar values of declared columns are evaluated",
    "bitwiseand": "write the condition with CASE or comparisons",
    "bitwiseor": "write the condition with CASE or comparisons",
    "bitwisexor": "write the condition with CASE or comparisons",
}


def _construct_hint(node: exp.Expression) -> str:
    """What works instead of an expression the proxy does not evaluate."""
    instead = _INSTEAD.get(node.key)
    if instead is not None:
        return instead
    if isinstance(node, exp.Func):
        names = sorted(
            n
            for n in {*pgeval.FUNCTIONS, "coalesce", "nullif", "greatest", "least"}
            if n.isidentifier() and not n.startswith("pg_")
        )
        return (
            "the functions evaluated over declared columns are "
            + ", ".join(names)
            + " (and CASE, casts, arithmetic, comparisons, LIKE, IN, BETWEEN); see docs/sql.md §2.1"
        )
    return ACCEPTED


def typeof(e: PostExpr) -> str:
    """The PostgreSQL type of an expression of the IR."""
    if isinstance(e, Compare | Logic):
        return "bool"
    if isinstance(e, Const):
        return e.pg_type or pgeval.literal_type(e.value)
    return e.pg_type or "int8"


def _position_error(clause: str, n: int) -> UnsupportedError:
    err = UnsupportedError(f"{clause} position {n} is not in select list")
    err.sqlstate = "42P10"  # type: ignore[misc]
    return err


def _type_error(e: pgeval.TypeMismatch, table: TableDecl) -> UnsupportedError:
    hint: str | None
    if e.sqlstate == "0A000" and "collation" in e.message:
        hint = "compare text with =, <>, IN or LIKE; ORDER BY orders text by code point"
    elif e.sqlstate in ("42883", "42804", "42846"):
        # PostgreSQL's own hint for a missing operator or function
        hint = "No operator or function matches the given name and argument types. You might need to add explicit type casts."
    else:
        hint = e.hint
    err = UnsupportedError(
        e.message + f" (in a statement over protected table {table.name})", hint=hint
    )
    err.sqlstate = e.sqlstate  # type: ignore[misc]
    return err


def _snippet(node: exp.Expression) -> str:
    """A short piece of the statement's own SQL, for a refusal (never data)."""
    try:
        text = node.sql(dialect="postgres")
    except Exception:
        return "this"
    return text if len(text) <= 40 else text[:37] + "..."


Leaf = Callable[[exp.Expression], PostExpr | None]


@dataclass
class _Builder:
    table: TableDecl
    aliases: frozenset[str]
    params: dict[int, int] = field(default_factory=dict)
    measures: list[Measure] = field(default_factory=list)
    attrs: set[str] = field(default_factory=set)
    #: the session's TimeZone (public: see rewriter.pgtime), set by rewriter.classify
    zone: str = field(default_factory=lambda: pgtime.SESSION_ZONE.get())
    #: Names of the public relations a statement joins (rewriter.lookups).
    resolver: lookups_.Resolver | None = None

    def field(self, node: exp.Expression) -> PostExpr | None:
        """A column of a public relation the statement joins; None for anything else."""
        if self.resolver is None or not isinstance(node, exp.Column):
            return None
        return self.resolver.field(node)

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
            unit = self.table.unit
            if unit is not None and unit.column == name:
                raise unit_column_error(self.table.name, name)
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
                    raise _cast_refusal(node, self.table)
                outer = outer or t
            node = node.this
        return node, outer

    def attr_ref(
        self, node: exp.Expression, *, output: bool = False
    ) -> tuple[AttributeDecl, str] | None:
        """An attribute reference under casts that keep how it compares, and its type; None
        for anything else (an expression)."""
        inner, cast = self.strip_cast(node)
        if not isinstance(inner, exp.Column) or self.field(inner) is not None:
            return None
        if isinstance(node, exp.Cast) and cast_typmod(node):
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
                return None
        return attr, cast or attr.pg_type

    # -- values --
    def signed(self, node: exp.Expression) -> tuple[exp.Expression, str | None, bool]:
        """A constant under casts and unary minus: the constant, the outermost cast type,
        and whether it is negated."""
        inner, cast = self.strip_cast(node)
        neg = False
        while isinstance(inner, exp.Neg):
            neg = not neg
            inner, c2 = self.strip_cast(inner.this)
            cast = cast or c2
        return inner, cast, neg

    def infinity(self, node: exp.Expression) -> int | None:
        """+1 or -1 when ``node`` is ``'infinity'`` or ``'-infinity'``, untyped or cast to a
        date or timestamp type; else None."""
        inner, cast, neg = self.signed(node)
        if not (isinstance(inner, exp.Literal) and inner.is_string) or neg:
            return None
        if cast is not None and cast not in pgtime.DATETIMES:
            return None
        return {"infinity": 1, "+infinity": 1, "-infinity": -1}.get(str(inner.this).strip().lower())

    def vs_infinity(self, op: str, x: PostExpr, node: exp.Expression) -> PostExpr:
        """``x op 'infinity'`` (``'-infinity'``) for a date or timestamp ``x``: PostgreSQL's
        infinite values are above (below) every finite one, so the comparison holds, or not,
        for every value of ``x``, and is NULL where ``x`` is: ``x = x``, or ``x <> x``. The
        infinite value itself is not evaluated elsewhere (0A000)."""
        sign = self.infinity(node)
        if typeof(x) not in pgtime.DATETIMES or sign is None:
            return self.compare(op, x, self.literal(node))
        below = op in ("<", "<=", "<>") if sign > 0 else op in (">", ">=", "<>")
        return Compare(op="=" if below else "<>", left=x, right=x)

    def value(self, node: exp.Expression, attr: AttributeDecl | None) -> Value:
        if (
            self.infinity(node) is not None
            and attr is not None
            and attr.pg_type in pgtime.DATETIMES
        ):
            raise _NotAValue()  # compared as an expression (vs_infinity)
        inner, cast, neg = self.signed(node)
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
                elif cast in pgtime.TYPES:
                    raise _NotAValue()  # a timestamp or interval: compared as an expression
            else:
                v = _number(str(inner.this))
            if neg:
                if not isinstance(v, Fraction):
                    raise InvalidValueError("invalid input for unary minus")
                v = -v
        else:
            raise _NotAValue()
        return v

    def is_value(self, node: exp.Expression) -> bool:
        inner = self.signed(node)[0]
        return isinstance(
            inner, exp.Parameter | exp.Placeholder | exp.Null | exp.Boolean | exp.Literal
        )

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

    # -- expressions (shared by cell-level and post-processing expressions) --
    def literal(self, node: exp.Expression) -> Const:
        """A constant as a typed value: integers int4/int8, decimals numeric with their
        scale, strings untyped until combined, a cast literal of its cast type."""
        inner, cast, neg = self.signed(node)
        if isinstance(inner, exp.Parameter | exp.Placeholder):
            if neg:
                raise _unsupported("a negated parameter", self.table)
            if cast is not None and pgtime.needs_zone("unknown", cast):
                # $n::timestamptz: read in the session's zone when bound
                raw = Const(value=Param(self.param_index(inner)), pg_type="text")
                return self.func("pg_time_tstz", [raw])  # type: ignore[return-value]
            return Const(value=Param(self.param_index(inner)), pg_type=cast or "unknown")
        if isinstance(inner, exp.Null):
            return Const(value=None, pg_type=cast or "unknown")
        if isinstance(inner, exp.Boolean):
            return Const(value=bool(inner.this), pg_type="bool")
        if not isinstance(inner, exp.Literal):
            what = sql_words(inner) if isinstance(inner, exp.Func | exp.Array) else "an expression"
            raise _unsupported(f"{what} in place of a constant", self.table,
                               hint="write a constant here (a number or a string)")  # fmt: skip
        text = str(inner.this)
        v: object
        if inner.is_string:
            v = text
        else:
            try:
                d = Decimal(text)
            except InvalidOperation:
                raise InvalidValueError("invalid input syntax for a number") from None
            v = (
                int(d)
                if d == d.to_integral_value() and "." not in text and "e" not in text.lower()
                else d
            )
        if neg:
            if isinstance(v, str):
                raise InvalidValueError("invalid input for unary minus")
            v = -v
        c = Const(value=v, pg_type=pgeval.literal_type(v) if not isinstance(v, str) else "unknown")
        if cast is not None:
            try:
                return Const(
                    value=pgeval.cast(
                        v,
                        c.pg_type,
                        cast,
                        cast_typmod(node) if isinstance(node, exp.Cast) else (),
                        zone=self.zone,
                    ),
                    pg_type=cast,
                )
            except pgtime.Unsupported as e:  # input PostgreSQL reads and the proxy does not
                raise UnsupportedError(e.message) from None
            except pgeval.EvalError as e:
                raise InvalidValueError(e.message) from None
        return c

    def convert(self, node: exp.Expression, leaf: Leaf) -> PostExpr:
        """The IR of a scalar expression; ``leaf`` resolves columns and aggregates (None:
        not a leaf)."""
        got = leaf(node)
        if got is not None:
            return got
        try:
            return self._convert(node, leaf)
        except pgeval.TypeMismatch as e:
            raise _type_error(e, self.table) from None

    def _convert(self, node: exp.Expression, leaf: Leaf) -> PostExpr:
        def c(n: exp.Expression) -> PostExpr:
            return self.convert(n, leaf)

        if isinstance(node, exp.Paren | exp.Alias):
            return c(node.this)
        if self.is_value(node):
            return self.literal(node)
        if isinstance(node, exp.Cast):
            t = cast_type(node)
            if t is None:
                raise _cast_refusal(node, self.table)
            arg = c(node.this)
            return self.cast(arg, t, cast_typmod(node))
        if isinstance(node, exp.Interval):
            try:
                iv = pgtime.interval_literal(node.meta.get("pg_text"), node.meta.get("pg_unit", ""))
            except pgeval.EvalError as e:
                err = InvalidValueError(e.message)
                err.sqlstate = e.sqlstate  # type: ignore[misc]
                raise err from None
            return Const(value=iv, pg_type="interval")
        op = _OPS.get(type(node))
        if op is not None:
            if self.infinity(node.expression) is not None:
                return self.vs_infinity(op, c(node.this), node.expression)
            if self.infinity(node.this) is not None:
                return self.vs_infinity(_FLIP[op], c(node.expression), node.this)
            return self.compare(op, c(node.this), c(node.expression))
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ):
            left, right = self._pair(c(node.this), c(node.expression), "IS DISTINCT FROM")
            d = Func(name="distinct", args=(left, right), pg_type="bool")
            return d if isinstance(node, exp.NullSafeNEQ) else Logic(op="not", args=(d,))
        aop = _ARITH.get(type(node))
        if aop is not None:
            left, right = c(node.this), c(node.expression)
            t = pgeval.arith_type(aop, typeof(left), typeof(right))
            return Arith(op=aop, left=self._as(left, t), right=self._as(right, t), pg_type=t)
        if isinstance(node, exp.And | exp.Or):
            return Logic(op=node.key, args=(c(node.this), c(node.expression)))
        if isinstance(node, exp.Not):
            return Logic(op="not", args=(c(node.this),))
        if isinstance(node, exp.Neg):
            arg = c(node.this)
            return Func(name="neg", args=(arg,), pg_type=typeof(arg))
        if isinstance(node, exp.Is):
            arg = c(node.this)
            target = node.expression
            if isinstance(target, exp.Null):
                out: PostExpr = Func(name="isnull", args=(arg,), pg_type="bool")
            elif isinstance(target, exp.Boolean):
                out = Logic(
                    op="and",
                    args=(
                        Logic(op="not", args=(Func(name="isnull", args=(arg,), pg_type="bool"),)),
                        Compare(
                            op="=", left=arg, right=Const(value=bool(target.this), pg_type="bool")
                        ),
                    ),
                )
            else:
                raise _unsupported(
                    f"the test IS {_snippet(target)}", self.table,
                    hint="IS [NOT] NULL, IS [NOT] TRUE, IS [NOT] FALSE and IS [NOT] DISTINCT FROM "
                    "are evaluated",
                )  # fmt: skip
            return Logic(op="not", args=(out,)) if node.args.get("negate") else out
        if isinstance(node, exp.Between):
            x = c(node.this)
            lo_n, hi_n = node.args["low"], node.args["high"]

            def bound(op: str, n: exp.Expression) -> PostExpr:
                if self.infinity(n) is not None:
                    return self.vs_infinity(op, x, n)
                return self.compare(op, x, c(n))

            a = Logic(op="and", args=(bound(">=", lo_n), bound("<=", hi_n)))
            if node.args.get("symmetric"):
                b = Logic(op="and", args=(bound(">=", hi_n), bound("<=", lo_n)))
                return Logic(op="or", args=(a, b))
            return a
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise _unsupported("IN with a subquery", self.table)
            x = c(node.this)
            items = [c(e) for e in node.expressions]
            if not items:
                raise _unsupported("an empty IN list", self.table)
            items = [self._pair(x, i, "IN")[1] for i in items]
            return Func(name="in", args=(x, *items), pg_type="bool")
        if isinstance(node, exp.Like | exp.ILike):
            x, pat = c(node.this), c(node.expression)
            x, pat = self._pair(x, pat, "LIKE")
            if not (pgeval.is_text(typeof(x)) and pgeval.is_text(typeof(pat))):
                raise _unsupported("LIKE on a value that is not text", self.table,
                                   hint="cast it to text first")  # fmt: skip
            f = Func(
                name="like" if isinstance(node, exp.Like) else "ilike",
                args=(x, pat),
                pg_type="bool",
            )
            return Logic(op="not", args=(f,)) if node.args.get("negate") else f
        if isinstance(node, exp.Case):
            subject = c(node.this) if node.this is not None else None
            whens: list[tuple[PostExpr, PostExpr]] = []
            for i in node.args.get("ifs") or []:
                cond = c(i.this)
                if subject is not None:
                    cond = self.compare("=", subject, cond)
                whens.append((cond, c(i.args["true"])))
            default = c(node.args["default"]) if node.args.get("default") is not None else None
            branches = [v for _, v in whens] + ([default] if default is not None else [])
            t = pgeval.common_type([typeof(b) for b in branches], "CASE")
            return Case(
                whens=tuple((w, self._to(v, t)) for w, v in whens),
                default=self._to(default, t) if default is not None else None,
                pg_type=t,
            )
        if isinstance(node, exp.Coalesce):
            args = [c(node.this), *(c(e) for e in node.expressions)]
            t = pgeval.common_type([typeof(a) for a in args], "COALESCE")
            return Func(name="coalesce", args=tuple(self._to(a, t) for a in args), pg_type=t)
        if isinstance(node, exp.Nullif):
            left, right = self._pair(c(node.this), c(node.expression), "NULLIF")
            return Func(name="nullif", args=(left, right), pg_type=typeof(left))
        if isinstance(node, exp.DPipe):
            return self.func("||", [c(node.this), c(node.expression)])
        if isinstance(node, exp.Extract):
            unit = node.this.name if isinstance(node.this, exp.Var) else str(node.this)
            return self.func(
                "extract", [Const(value=unit.lower(), pg_type="text"), c(node.expression)]
            )
        if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
            trunc = node.args.get("unit")
            unit_name = str(
                trunc.name if isinstance(trunc, exp.Var) else getattr(trunc, "this", trunc)
            )
            args = [Const(value=unit_name.lower(), pg_type="text"), c(node.this)]
            if node.args.get("zone") is not None:
                args.append(c(node.args["zone"]))
            return self.func("date_trunc", args)
        time = self.time_call(node, c)
        if time is not None:
            return time
        fname = _FUNCS.get(type(node))
        if (
            isinstance(node, exp.Anonymous)
            and node.name.lower() in pgeval.FUNCTIONS
            and node.name.lower() not in pgtime.INTERNAL
        ):
            fname = node.name.lower()
            return self.func(fname, [c(e) for e in node.expressions])
        if isinstance(node, exp.Pad):
            fname = "lpad" if node.args.get("is_left") else "rpad"
        if isinstance(node, exp.Trim):
            fname = TRIMS.get(str(node.args.get("position") or "BOTH").upper())
            if fname is None or node.args.get("collation") is not None:
                raise _unsupported("TRIM with these options", self.table,
                                   hint="write btrim(x, chars), ltrim(x, chars) or rtrim(x, chars)")  # fmt: skip
        if isinstance(node, exp.StrPosition) and node.args.get("position") is not None:
            raise _unsupported("position() with a start", self.table, hint="write strpos(s, t)")
        keys = _FUNC_ARGS.get(type(node))
        if fname is not None and keys is not None:
            return self.func(fname, [c(node.args[k]) for k in keys if node.args.get(k) is not None])
        if fname is not None:
            args = [
                c(v)
                for k, v in node.args.items()
                if isinstance(v, exp.Expression) and k != "ignore_nulls" and v is not None
            ]
            extra = node.args.get("expressions")
            if isinstance(extra, list):
                args += [c(e) for e in extra]
            return self.func(fname, args)
        if isinstance(node, exp.Mod):
            return self.func("mod", [c(node.this), c(node.expression)])
        raise _unsupported(sql_words(node), self.table, hint=_construct_hint(node))

    def cast(self, arg: PostExpr, t: str, typmod: tuple[int, ...]) -> PostExpr:
        """``arg::t``; a cast into ``timestamp with time zone`` carries the session's zone."""
        src = typeof(arg)
        if (t in pgtime.TYPES or src in pgtime.TYPES) and not pgtime.castable(src, t):
            raise pgeval.TypeMismatch(
                f"cannot cast type {pgeval.sql_type(src)} to {pgeval.sql_type(t)}", sqlstate="42846"
            )
        if pgtime.needs_zone(src, t) and not (isinstance(arg, Const) and src == "unknown"):
            zoned = self.func("pg_time_tstz", [arg])
            if typmod:  # timestamptz(p): the instant rounded to p digits, as PostgreSQL
                return Cast(arg=zoned, pg_type=t, source=t, typmod=typmod)
            return zoned
        return Cast(arg=arg, pg_type=t, source=src, typmod=typmod)

    def time_call(
        self, node: exp.Expression, c: Callable[[exp.Expression], PostExpr]
    ) -> PostExpr | None:
        """Time functions sqlglot parses into nodes of its own: ``date(x)``, ``x AT TIME ZONE
        z``, ``make_interval(...)``; ``now()`` and its kin are refused (the clock)."""
        if isinstance(node, exp.Date) and not node.args.get("zone") and not node.expressions:
            return self.func("date", [c(node.this)])
        if isinstance(node, exp.DateBin) and node.args.get("unit") is not None:
            stride = self._as(c(node.this), "interval")
            return self.func("date_bin", [stride, c(node.expression), c(node.args["unit"])])
        if isinstance(node, exp.AtTimeZone):
            return self.func("timezone", [c(node.args["zone"]), c(node.this)])
        if isinstance(node, exp.MakeInterval):
            named = {k: v for k, v in node.args.items() if isinstance(v, exp.Expression)}
            args: list[PostExpr] = []
            for name in pgtime.MAKE_INTERVAL_ARGS:
                key = {"mins": "minute", "secs": "second", "hours": "hour", "days": "day",
                       "weeks": "week", "months": "month", "years": "year"}[name]  # fmt: skip
                v = named.get(key)
                if isinstance(v, exp.Kwarg):
                    v = v.expression
                zero = Const(
                    value=Decimal(0) if name == "secs" else 0,
                    pg_type="numeric" if name == "secs" else "int4",
                )
                args.append(c(v) if v is not None else zero)
            return self.func("make_interval", args)
        if isinstance(node, exp.Overlaps):
            periods = [node.this, node.expression]
            if not all(isinstance(t, exp.Tuple) and len(t.expressions) == 2 for t in periods):
                raise _unsupported("OVERLAPS of something other than two pairs", self.table,
                                   hint="write (start, end) OVERLAPS (start, end)")  # fmt: skip
            return self.func("overlaps", [c(e) for t in periods for e in t.expressions])
        justify = _JUSTIFY.get(type(node))
        if justify is not None:
            return self.func(justify, [c(node.this)])
        if isinstance(
            node,
            exp.CurrentDate
            | exp.CurrentTimestamp
            | exp.CurrentTime
            | exp.Localtime
            | exp.Localtimestamp
            | exp.CurrentDatetime,
        ):
            raise _unsupported("the clock (now(), current_date, current_timestamp, localtimestamp ...)", self.table,
                               hint="the current date or time is not evaluated by the proxy (an answer must not change with the day it is asked): write the date as a constant, e.g. DATE '2010-10-31' - 30")  # fmt: skip
        return None

    def func(self, name: str, args: list[PostExpr]) -> PostExpr:
        args = pgtime.zone_args(name, args, Const(value=self.zone, pg_type="text"))
        types = [typeof(a) for a in args]
        pgtime.check_constants(
            name,
            [a.value if isinstance(a, Const) else pgtime.NOT_CONSTANT for a in args],
            types,
        )
        t = pgeval.function_type(name, types)
        if name in ("greatest", "least"):
            args = [self._to(a, t) for a in args]
            types = [t] * len(args)
        return Func(name=name, args=tuple(args), pg_type=t, arg_types=tuple(types))

    def _as(self, e: PostExpr, t: str) -> PostExpr:
        """``e`` as a value of type ``t`` when it is an untyped literal."""
        if isinstance(e, Const) and e.pg_type in ("unknown", "") and not isinstance(e.value, Param):
            return typed_const(e.value, t, self.zone)
        if isinstance(e, Const) and isinstance(e.value, Param) and e.pg_type == "unknown":
            return Const(value=e.value, pg_type=t)
        return e

    def _to(self, e: PostExpr, t: str) -> PostExpr:
        """``e`` as a value of the common type ``t`` of CASE, COALESCE, GREATEST: an untyped
        literal read as ``t``, a date or timestamp cast to ``t`` (PostgreSQL's implicit
        casts; the other types convert their values when evaluated)."""
        src = typeof(e)
        if src != t and src in pgtime.DATETIMES and t in pgtime.DATETIMES:
            return self.cast(e, t, ())
        return self._as(e, t)

    def _pair(self, a: PostExpr, b: PostExpr, what: str) -> tuple[PostExpr, PostExpr]:
        ta, tb = typeof(a), typeof(b)
        if ta == "unknown" and tb != "unknown":
            a = self._as(a, tb)
        elif tb == "unknown" and ta != "unknown":
            b = self._as(b, ta)
        return a, b

    def compare(self, op: str, a: PostExpr, b: PostExpr) -> Compare:
        a, b = self._pair(a, b, op)
        pgeval.comparable(typeof(a), typeof(b), op)
        return Compare(op=op, left=a, right=b)

    def cell_leaf(self, node: exp.Expression) -> PostExpr | None:
        """Leaves of cell-level expressions: declared attributes, columns of public relations."""
        joined = self.field(node)
        if joined is not None:
            return joined
        if isinstance(node, exp.Column):
            attr = self.attribute(self.column(node))
            return AttrRef(name=attr.name, pg_type=attr.pg_type)
        if isinstance(node, exp.AggFunc | exp.Window | exp.Filter | exp.WithinGroup):
            raise _unsupported("an aggregate inside a condition or an aggregate", self.table,
                               hint="aggregates go in the select list or HAVING")  # fmt: skip
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists):
            raise _unsupported("a subquery", self.table)
        return None

    def cell(self, node: exp.Expression) -> PostExpr:
        return self.convert(node, self.cell_leaf)

    # -- predicates --
    def pred(self, node: exp.Expression) -> Pred:
        """A condition over the cells: the fast forms (a column compared with constants)
        as masks, anything else as an expression evaluated over the public values."""
        try:
            return self._pred(node)
        except _NotAValue:
            pass
        e = self.cell(node)
        if typeof(e) not in ("bool", "unknown"):
            raise _unsupported("a condition that is not boolean", self.table,
                               hint="write a comparison, e.g. <expression> = <constant>")  # fmt: skip
        return PExpr(e)

    def _pred(self, node: exp.Expression) -> Pred:
        if isinstance(node, exp.Paren):
            return self._pred(node.this)
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
            if la is not None and ra is None and self.is_value(right):
                self._comparable(la, op)
                return PCmp(la.name, op, self.value(right, la))
            if ra is not None and la is None and self.is_value(left):
                self._comparable(ra, op)
                return PCmp(ra.name, _FLIP[op], self.value(left, ra))
            if la is None and ra is None and self.is_value(left) and self.is_value(right):
                return PConst(
                    _const_compare(op, self.value(left, None), self.value(right, None), self.table)
                )
            raise _NotAValue()
        if isinstance(node, exp.Between):
            attr = self._maybe_attr(node.this)
            lo_n, hi_n = node.args["low"], node.args["high"]
            if attr is None or not (self.is_value(lo_n) and self.is_value(hi_n)):
                raise _NotAValue()
            self._comparable(attr, "<")
            lo, hi = self.value(lo_n, attr), self.value(hi_n, attr)
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
            attr = self._maybe_attr(node.this)
            items = node.expressions
            if not items:
                raise _unsupported("an empty IN list", self.table)
            if attr is None or not all(self.is_value(e) for e in items):
                raise _NotAValue()
            return PLogic("or", tuple(PCmp(attr.name, "=", self.value(e, attr)) for e in items))
        if isinstance(node, exp.Is):
            target = node.expression
            attr = self._maybe_attr(node.this)
            if attr is None:
                raise _NotAValue()
            if isinstance(target, exp.Null):
                p: Pred = PIsNull(attr.name)
            elif isinstance(target, exp.Boolean) and attr.kind is Kind.BOOLEAN:
                # x IS TRUE: the comparison with unknown mapped to false (never NULL)
                cmp = PCmp(attr.name, "=", bool(target.this))
                p = PLogic("and", (PLogic("not", (PIsNull(attr.name),)), cmp))
            else:
                raise _NotAValue()
            return PLogic("not", (p,)) if node.args.get("negate") else p
        if isinstance(node, exp.Column | exp.Cast):
            attr = self._maybe_attr(node)
            if attr is None:
                raise _NotAValue()
            if attr.kind is not Kind.BOOLEAN:
                raise _unsupported("a non-boolean column used as a condition", self.table,
                                   hint="compare the column with a value")  # fmt: skip
            return PBool(attr.name)
        if isinstance(node, exp.Literal) and not node.is_string:
            raise _unsupported("a number used as a condition", self.table,
                               hint="write a comparison, e.g. <column> = <constant>")  # fmt: skip
        raise _NotAValue()

    def _comparable(self, attr: AttributeDecl, op: str) -> None:
        if attr.kind in (Kind.CATEGORICAL, Kind.BOOLEAN) and op not in ("=", "<>"):
            raise UnsupportedError(
                f"ordering comparisons on column {attr.name} are not supported",
                hint=f"the order of its values depends on the database's collation; compare "
                f"{attr.name} with =, <>, IN, NOT IN or LIKE",
            )

    def _maybe_attr(self, node: exp.Expression) -> AttributeDecl | None:
        ref = self.attr_ref(node)
        return None if ref is None else ref[0]

    # -- aggregates --
    def measure(self, m: Measure) -> int:
        if m not in self.measures:
            self.measures.append(m)
        return self.measures.index(m)

    def _numeric_arg(
        self, node: exp.Expression, func: str, before: set[str] | None = None
    ) -> tuple[PostExpr, str]:
        """The argument of SUM/AVG/variance, as a cell expression, and its type; a clamped
        column's value read over its value axis (rewriter.clamp). ``before``: the attributes
        read before the aggregate was."""
        before = set(self.attrs) if before is None else before
        e = self.cell(node)
        values = clamp.summand(self.table, e, func)
        if values is not None:  # only the values of the clamped columns are read there
            self.attrs -= _attrs_of(e) - before - _attrs_of(values)
            self.attrs |= {n for n in _attrs_of(values) if clamp.source_of(n) is not None}
            e = values
        t = typeof(e)
        if not pgeval.is_number(t):
            raise _unsupported(f"{func.upper()} of a value of type {pgeval.sql_type(t)}", self.table,
                               hint=f"{func.upper()} is answered over numbers: integer columns and numeric expressions of declared columns")  # fmt: skip
        for name in clamp.values_read(e):
            a = self.table.attribute(name)
            if a.kind is Kind.NUMERIC:
                raise _unsupported(f"{func.upper()} over column {name}, declared in bins", self.table,
                                   hint=f"{name} is declared with bins wider than one value; {func.upper()} needs the values themselves: declare clamp = true for it in lapras.toml (its values clamped to its range)")  # fmt: skip
            if func in ("sum", "avg") and isinstance(e, AttrRef) and not a.unit_bins:
                raise _unsupported(f"{func.upper()}({name}) over a binned column", self.table,
                                   hint=f"{name} is declared with bins wider than one value: SUM/AVG need unit bins, or clamp = true in its declaration (its values clamped to its range)")  # fmt: skip
        return e, t

    def _count_of(self, e: PostExpr, filt: Pred | None) -> int:
        if isinstance(e, AttrRef) and not self.table.attribute(e.name).nullable:
            return self.measure(Measure(kind=MeasureKind.COUNT_STAR, filter=filt))
        if isinstance(e, AttrRef):
            return self.measure(Measure(kind=MeasureKind.COUNT, attribute=e.name, filter=filt))
        return self.measure(Measure(kind=MeasureKind.COUNT, expr=e, filter=filt))

    def aggregate(self, node: exp.Expression) -> AggRef | None:
        filt: Pred | None = None
        if isinstance(node, exp.Filter):
            where = node.expression
            filt = self.pred(where.this if isinstance(where, exp.Where) else where)
            node = node.this
        within: exp.Expression | None = None
        within_desc = False
        if isinstance(node, exp.WithinGroup):
            order = node.expression
            items = order.expressions if isinstance(order, exp.Order) else []
            if len(items) != 1:
                raise _unsupported("WITHIN GROUP with several ORDER BY items", self.table)
            within_desc = bool(items[0].args.get("desc"))
            if within_desc and not isinstance(node.this, exp.Mode):
                raise _unsupported("WITHIN GROUP (ORDER BY ... DESC)", self.table,
                                   hint="write WITHIN GROUP (ORDER BY x) with the fraction 1 - f")  # fmt: skip
            within = items[0].this
            node = node.this
        if isinstance(node, exp.Mode):
            if within is None:
                raise _unsupported("mode() without WITHIN GROUP", self.table,
                                   hint="write mode() WITHIN GROUP (ORDER BY x)")  # fmt: skip
            e = self.cell(within)
            h = self.measure(Measure(kind=MeasureKind.HIST, expr=e, filter=filt))
            return AggRef(func="mode", value=h, pg_type=typeof(e), desc=within_desc)
        if isinstance(node, exp.PercentileCont | exp.PercentileDisc):
            if within is None:
                raise _unsupported("a percentile without WITHIN GROUP", self.table)
            if isinstance(node.this, exp.Array):
                name = (
                    "percentile_cont" if isinstance(node, exp.PercentileCont) else "percentile_disc"
                )
                raise _unsupported(f"{name}() of an ARRAY of fractions", self.table,
                                   hint=f"write one {name}(f) WITHIN GROUP (ORDER BY x) per "
                                   f"fraction f: {name}(0.25) ..., {name}(0.5) ...")  # fmt: skip
            frac = self.literal(node.this)
            if not isinstance(frac.value, int | Decimal) or not 0 <= frac.value <= 1:
                raise InvalidValueError("percentile value must be a constant between 0 and 1",
                                        hint="write percentile_cont(0.5) WITHIN GROUP (ORDER BY x)")  # fmt: skip
            e = self.cell(within)
            t = typeof(e)
            cont = isinstance(node, exp.PercentileCont)
            if cont and not pgeval.is_number(t):
                raise _unsupported("percentile_cont of a value that is not a number", self.table,
                                   hint="use percentile_disc for other types")  # fmt: skip
            h = self.measure(Measure(kind=MeasureKind.HIST, expr=e, filter=filt))
            return AggRef(
                func="percentile_cont" if cont else "percentile_disc",
                value=h,
                fraction=float(frac.value),
                pg_type="float8" if cont else t,
            )
        if within is not None:
            raise _unsupported(sql_words(node) + " WITHIN GROUP", self.table)
        if isinstance(node, exp.Median):
            raise _unsupported("function median()", self.table,
                               hint="PostgreSQL writes the median as percentile_cont(0.5) WITHIN GROUP (ORDER BY x)")  # fmt: skip
        if not isinstance(node, exp.AggFunc):
            if filt is not None:
                raise _unsupported("FILTER on something other than an aggregate", self.table)
            return None
        if (
            node.args.get("expressions")
            and not isinstance(node.this, exp.Distinct)
            and not isinstance(node, exp.AnonymousAggFunc)  # refused below, by its name
        ):
            raise _unsupported(f"aggregate {sql_words(node)} with several arguments", self.table,
                               hint=f"{AGGREGATES} are answered, each of one argument")  # fmt: skip
        if isinstance(node, exp.Count):
            arg = node.this
            if isinstance(arg, exp.Distinct):
                if len(arg.expressions) != 1:
                    raise _unsupported("COUNT(DISTINCT ...) of several values", self.table)
                h = self.measure(
                    Measure(kind=MeasureKind.HIST, expr=self.cell(arg.expressions[0]), filter=filt)
                )
                return AggRef(func="count_distinct", value=h, pg_type="int8")
            if isinstance(arg, exp.Star) or arg is None:
                return AggRef(
                    func="count",
                    value=self.measure(Measure(kind=MeasureKind.COUNT_STAR, filter=filt)),
                    pg_type="int8",
                )
            inner, _ = self.strip_cast(arg)
            if isinstance(inner, exp.Literal | exp.Boolean):
                return AggRef(
                    func="count",
                    value=self.measure(Measure(kind=MeasureKind.COUNT_STAR, filter=filt)),
                    pg_type="int8",
                )
            if isinstance(inner, exp.Null):
                raise _unsupported("COUNT(NULL)", self.table)
            ref = self.attr_ref(arg)
            e = (
                AttrRef(name=ref[0].name, pg_type=ref[0].pg_type)
                if ref is not None
                else self.cell(arg)
            )
            return AggRef(func="count", value=self._count_of(e, filt), pg_type="int8")
        if isinstance(node, exp.Sum | exp.Avg):
            func = "sum" if isinstance(node, exp.Sum) else "avg"
            if isinstance(node.this, exp.Distinct):
                raise _unsupported(f"{func.upper()}(DISTINCT ...)", self.table)
            inner, _ = self.strip_cast(node.this)
            if isinstance(inner, exp.Literal) and not inner.is_string:
                k = _number(str(inner.this))
                if k.denominator != 1:
                    raise _unsupported(f"{func.upper()} of a non-integer constant", self.table)
                count = self.measure(Measure(kind=MeasureKind.COUNT_STAR, filter=filt))
                pg = "int8" if func == "sum" else "numeric"
                return AggRef(func=func, value=count, count=count, scale=int(k), pg_type=pg)
            before = set(self.attrs)
            ref = self.attr_ref(node.this)
            if (
                ref is not None
                and ref[0].kind is not Kind.INTEGER
                and ref[1] == ref[0].pg_type
                and not ref[0].clamp
            ):
                raise _unsupported(f"{func.upper()} over a non-integer column", self.table,
                                   hint=f"SUM and AVG are answered over integer attributes with unit bins, and over columns declared with clamp = true ([tables.{self.table.name}.attributes.{ref[0].name}] in lapras.toml)")  # fmt: skip
            e, t = self._numeric_arg(node.this, func, before)
            s = self.measure(Measure(kind=MeasureKind.SUM, expr=e, filter=filt))
            c = self._count_of(e, filt)
            integral = t in INTEGER_TYPES
            if func == "sum":
                pg = (
                    "int8"
                    if t in ("int2", "int4")
                    else ("float8" if t in FLOAT_TYPES else "numeric")
                )
            else:
                pg = "float8" if t in FLOAT_TYPES else "numeric"
            return AggRef(func=func, value=s, count=c, pg_type=pg, integral=integral)
        variance = {
            exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
            exp.Variance: "var_samp", exp.VariancePop: "var_pop",
        }.get(type(node))  # fmt: skip
        if variance is not None:
            e, t = self._numeric_arg(node.this, variance)
            s = self.measure(Measure(kind=MeasureKind.SUM, expr=e, filter=filt))
            q = self.measure(Measure(kind=MeasureKind.SUMSQ, expr=e, filter=filt))
            c = self._count_of(e, filt)
            return AggRef(func=variance, value=s, count=c, square=q,
                          pg_type="float8" if t in FLOAT_TYPES else "numeric")  # fmt: skip
        if isinstance(node, exp.Min | exp.Max):
            e = self.cell(node.this)
            h = self.measure(Measure(kind=MeasureKind.HIST, expr=e, filter=filt))
            return AggRef(
                func="min" if isinstance(node, exp.Min) else "max", value=h, pg_type=typeof(e)
            )
        word = sql_words(node)
        leaks = ("string_agg", "array_agg", "json_agg", "jsonb_agg", "group_concat", "xmlagg")
        if any(x in word for x in leaks) or isinstance(node, exp.ArrayAgg | exp.GroupConcat):
            raise RowAccessError(
                f"{word} returns the values of rows of protected table {self.table.name} and is refused",
                hint="aggregates that summarise (count, sum, avg, min, max, stddev, percentiles) are answered",
            )
        hint = f"the aggregates answered are {AGGREGATES}"
        if isinstance(node, exp.LogicalOr | exp.LogicalAnd):
            hint = (
                "write count(*) FILTER (WHERE x) > 0 for bool_or(x), and count(*) FILTER "
                "(WHERE NOT x) = 0 for bool_and(x) or every(x): comparisons of noisy counts"
            )
        raise _unsupported(f"aggregate {word}", self.table, hint=hint)


def interval_of(b: _Builder, node: exp.Expression) -> AggRef | None:
    """``lapras_interval_low(<aggregate>)`` / ``lapras_interval_high(<aggregate>)``: the
    aggregate with the end of its 95% interval to give (``rewriter.intervals``); None for any
    other node."""
    if not isinstance(node, exp.Anonymous):
        return None
    name = node.name.lower()
    bound = intervals.FUNCTIONS.get(name)
    if bound is None:
        return None
    example = f"{name}(count(*)), {name}(avg(age))"
    args = list(node.expressions)
    inner = args[0].unnest() if len(args) == 1 else None
    agg = b.aggregate(inner) if inner is not None else None
    if agg is None:
        raise _unsupported(f"{name} of something other than one aggregate", b.table,
                           hint=f"write {name}(<aggregate>), e.g. {example}")  # fmt: skip
    if agg.func.startswith(("var", "stddev")) or agg.func == "mode":
        raise _unsupported(f"{name} of {agg.func}", b.table,
                           hint="intervals are given for count, sum, avg, min, max, percentiles and count(DISTINCT)")  # fmt: skip
    return dataclasses.replace(agg, bound=bound)


class _NotAValue(Exception):
    """Internal: the node is not a constant, or not of a predicate's fast form."""


def _attrs_of(e: object) -> set[str]:
    """The attributes an expression of the IR reads."""
    return {n.name for n in nodes(e) if isinstance(n, AttrRef)}


def _number(text: str) -> Fraction:
    try:
        return Fraction(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        raise InvalidValueError(
            "invalid input syntax for a number", hint="compare integer columns with numbers"
        ) from None


def _date(text: str) -> dt.date:
    try:
        return pgtime.parse_date(text)
    except pgeval.EvalError as e:
        err = InvalidValueError(e.message, hint="write dates as 'YYYY-MM-DD'")
        err.sqlstate = e.sqlstate  # type: ignore[misc]
        raise err from None


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


def check_clauses(select: exp.Select, table: TableDecl) -> None:
    """Refuse the clauses of a SELECT that are never answered over a protected table."""
    for key, words in (
        ("joins", "a join"),
        ("laterals", "LATERAL"),
        ("with_", "WITH"),
        ("with", "WITH"),
        ("windows", "a WINDOW clause"),
        ("qualify", "QUALIFY"),
        ("into", "SELECT INTO"),
        ("locks", "FOR UPDATE/SHARE"),
        ("sample", "TABLESAMPLE"),
        ("pivots", "PIVOT"),
    ):
        if select.args.get(key):
            raise _unsupported(words, table)
    distinct = select.args.get("distinct")
    if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
        raise _unsupported("DISTINCT ON", table, hint="write GROUP BY")


#: PostgreSQL's output names of function calls (FigureColname), where sqlglot renames them.
def _int_literal(node: exp.Expression) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(str(node.this))
        except ValueError:
            return None
    return None


_WINDOW_FUNCS: dict[type[exp.Expression], str] = {
    exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist", exp.Ntile: "ntile",
    exp.Lag: "lag", exp.Lead: "lead", exp.FirstValue: "first_value",
    exp.LastValue: "last_value", exp.NthValue: "nth_value",
}  # fmt: skip
#: The window functions of the grouped result, in SQL words (for refusals' hints).
WINDOW_FUNCTIONS = (
    "sum, count, avg, min, max, row_number, rank, dense_rank, percent_rank, cume_dist, ntile, "
    "lag, lead, first_value, last_value, nth_value"
)


def _no_column(node: exp.Expression) -> PostExpr | None:
    if isinstance(node, exp.Column | exp.AggFunc | exp.Window):
        raise _NotAValue()
    return None


def row_count(b: _Builder, select: exp.Query, key: str) -> Value | None:
    """The value of ``LIMIT`` (``FETCH FIRST|NEXT n ROWS ONLY``, PostgreSQL's standard
    spelling) or ``OFFSET`` (``key``): a parameter, or a constant expression evaluated with
    PostgreSQL's semantics as a bigint (``LIMIT 2 + 3``, ``LIMIT '10'``, ``LIMIT 2.6`` rounds
    to 3); None for no limit (``LIMIT ALL``, ``LIMIT NULL``)."""
    table = b.table
    node = select.args.get(key)
    if node is None:
        return None
    what = key.upper()
    if isinstance(node, exp.Fetch):
        what = f"FETCH {str(node.args.get('direction') or 'FIRST').upper()}"
        opts = node.args.get("limit_options")
        if opts is not None and (opts.args.get("percent") or opts.args.get("with_ties")):
            raise _unsupported(
                f"{what} ... {'PERCENT' if opts.args.get('percent') else 'WITH TIES'}", table,
                hint=f"write {what} n ROWS ONLY, or LIMIT n",
            )  # fmt: skip
        e = node.args.get("count")
        if e is None:
            return 1  # FETCH FIRST ROW ONLY
    else:
        e = node.args.get("expression") or node.this
    if isinstance(e, exp.Var) and e.name.upper() == "ALL":
        return None
    try:
        v = b.value(e, None)
    except _NotAValue:
        v = _constant_count(b, e, what)
    if isinstance(v, Param):
        b.params[v.index] = 20
        return v
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = Fraction(int(v.strip()))
        except ValueError:
            raise InvalidValueError("invalid input syntax for type bigint") from None
    if not isinstance(v, Fraction):
        raise InvalidValueError(f"{what} takes a number")
    rounded: object = pgeval.cast(Decimal(v.numerator) / Decimal(v.denominator), "numeric", "int8")
    assert isinstance(rounded, int)
    n = rounded
    if n < 0:
        neg = InvalidValueError(f"{'OFFSET' if key == 'offset' else 'LIMIT'} must not be negative")
        neg.sqlstate = "2201X" if key == "offset" else "2201W"  # type: ignore[misc]
        raise neg
    return n


def _constant_count(b: _Builder, e: exp.Expression, what: str) -> Fraction | None:
    """A constant expression of LIMIT/OFFSET, evaluated as PostgreSQL casts it to bigint."""
    table = b.table
    try:
        c = b.convert(e, _no_column)
    except _NotAValue:
        raise _unsupported(
            f"a column or an aggregate in {what}", table,
            hint=f"{what} takes a constant: write {what} <number> or {what} $n",
        ) from None  # fmt: skip
    if any(isinstance(n, Const) and isinstance(n.value, Param) for n in nodes(c)):
        raise _unsupported(
            f"a parameter inside an expression in {what}", table, hint=f"write {what} $n"
        )
    t = typeof(c)
    if t not in ("int2", "int4", "int8", "numeric", "float4", "float8", "unknown"):
        raise UnsupportedError(
            f"argument of {what.split()[0]} must be type bigint, not type {pgeval.sql_type(t)}"
        )
    try:
        got = evaluate_with(Cast(arg=c, pg_type="int8", source=t), _no_leaf)
    except pgeval.EvalError as err:
        raise InvalidValueError(err.message) from None
    return None if got is None else Fraction(int(got))  # type: ignore[call-overload]


def _no_leaf(e: PostExpr) -> object:
    raise pgeval.EvalError("0A000", "a value that is not a constant")


def window_function(b: _Builder, node: exp.Window, leaf: Leaf) -> Window:
    """The IR of a window function over the grouped result (``leaf`` resolves its
    arguments: group keys and aggregates), with PostgreSQL's result types: int8 for the
    numbering functions, float8 for ``percent_rank``/``cume_dist``, int4 for ``ntile``, the
    argument's for ``lag``/``lead`` (with its default: their common type) and the value
    functions."""
    table = b.table
    if node.args.get("alias") is not None:
        raise _unsupported("a named window (OVER w)", table,
                           hint="write the window in OVER (PARTITION BY ... ORDER BY ...)")  # fmt: skip
    frame = _window_frame(b, node.args.get("spec"))
    fn = node.this
    if isinstance(fn, exp.Filter):
        raise _unsupported(
            "FILTER in a window function", table,
            hint="write the condition as a CASE inside the window's argument",
        )  # fmt: skip
    if isinstance(fn, exp.IgnoreNulls | exp.RespectNulls):
        raise _unsupported(f"{sql_words(fn.this)} with IGNORE/RESPECT NULLS", table)
    func = _WINDOW_FUNCS.get(type(fn))
    if func is None:
        raise _unsupported(
            f"window function {sql_words(fn).removeprefix('function ')}", table,
            hint=f"the window functions answered over the grouped result are {WINDOW_FUNCTIONS}",
        )  # fmt: skip
    if func in ("sum", "avg", "min", "max", "count") and (
        isinstance(fn.this, exp.Distinct) or fn.args.get("expressions")
    ):
        raise _unsupported(f"{func}(DISTINCT ...) or several arguments in a window", table)

    def conv(n: exp.Expression) -> PostExpr:
        return b.convert(n, leaf)

    arg: PostExpr | None = None
    extra: list[PostExpr] = []
    inner = fn.this
    if func in ("sum", "avg", "min", "max", "lag", "lead", "first_value", "last_value",
                "nth_value") or (
        func == "count" and inner is not None and not isinstance(inner, exp.Star)
    ):  # fmt: skip
        arg = conv(inner)
    elif func == "ntile":
        if inner is None:
            raise _unsupported("ntile() without a number of buckets", table)
        arg = conv(inner)
        if typeof(arg) not in ("int2", "int4", "unknown"):
            raise UnsupportedError(
                f"function ntile({pgeval.sql_type(typeof(arg))}) does not exist",
                hint="ntile takes an integer number of buckets",
            )
        arg = b._as(arg, "int4")
    at = typeof(arg) if arg is not None else "int8"
    if func in ("lag", "lead"):
        offset = fn.args.get("offset")
        default = fn.args.get("default")
        if offset is not None:
            extra.append(b._as(conv(offset), "int4"))
            if typeof(extra[0]) not in ("int2", "int4"):
                raise UnsupportedError(
                    f"the offset of {func} must be an integer", hint=f"write {func}(x, 1)"
                )
        if default is not None:
            d = conv(default)
            at = pgeval.common_type([at, typeof(d)], func)
            arg = b._as(arg, at) if arg is not None else arg
            extra.append(b._as(d, at))
    if func == "nth_value":
        extra.append(b._as(conv(fn.args["offset"]), "int4"))
    partition = tuple(conv(p) for p in node.args.get("partition_by") or [])
    onode = node.args.get("order")
    order = tuple(
        OrderItem(
            expr=conv(o.this),
            desc=bool(o.args.get("desc")),
            nulls_first=o.args.get("nulls_first"),
        )
        for o in (onode.expressions if onode is not None else [])
    )
    if func in ("count", "row_number", "rank", "dense_rank"):
        t = "int8"
    elif func in ("percent_rank", "cume_dist"):
        t = "float8"
    elif func == "ntile":
        t = "int4"
    elif func == "sum":
        t = "int8" if at in ("int2", "int4") else ("float8" if at in FLOAT_TYPES else "numeric")
    elif func == "avg":
        t = "float8" if at in FLOAT_TYPES else "numeric"
    else:
        t = at
    if frame is not None and frame.mode == "groups" and not order:
        raise _unsupported("GROUPS mode without ORDER BY", table,
                           hint="GROUPS mode requires an ORDER BY clause")  # fmt: skip
    if func in ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile",
                "lag", "lead"):  # fmt: skip
        frame = None  # these ignore the frame (PostgreSQL)
    return Window(
        func=func,
        arg=arg,
        partition=partition,
        order=order,
        pg_type=t,
        args=tuple(extra),
        frame=frame,
    )


def _window_frame(b: _Builder, spec: exp.Expression | None) -> Frame | None:
    """A window's frame clause: ROWS or GROUPS with UNBOUNDED, ``n`` PRECEDING/FOLLOWING or
    CURRENT ROW bounds; RANGE with UNBOUNDED or CURRENT ROW bounds (a RANGE offset and
    EXCLUDE are refused)."""
    if spec is None:
        return None
    table = b.table
    mode = str(spec.args.get("kind") or "").lower()
    if mode not in ("rows", "range", "groups"):
        raise _unsupported(f"a window frame in {mode.upper() or 'this'} mode", table)
    if spec.args.get("exclude") is not None:
        raise _unsupported("EXCLUDE in a window frame", table,
                           hint="write the frame without EXCLUDE")  # fmt: skip

    def bound(value: object, side: object, default: str) -> tuple[str, int]:
        if value is None:
            return default, 0
        word = str(
            value.name
            if isinstance(value, exp.Expression) and not isinstance(value, exp.Literal)
            else value
        ).upper()
        direction = str(side or "").upper()
        if word == "UNBOUNDED":
            return ("unbounded_preceding" if direction == "PRECEDING" else "unbounded_following"), 0
        if word == "CURRENT ROW":
            return "current", 0
        if mode == "range":
            raise _unsupported("RANGE with an offset in a window frame", table,
                               hint="write ROWS or GROUPS with an offset, or RANGE with UNBOUNDED or CURRENT ROW")  # fmt: skip
        if not isinstance(value, exp.Expression):
            raise _unsupported("this window frame bound", table)
        n = _int_literal(value)
        if n is None:
            raise _unsupported("a window frame offset that is not a constant integer", table)
        if n < 0:
            err = InvalidValueError("frame starting offset must not be negative")
            err.sqlstate = "22013"  # type: ignore[misc]
            raise err
        return ("preceding" if direction == "PRECEDING" else "following"), n

    start, s_off = bound(spec.args.get("start"), spec.args.get("start_side"), "unbounded_preceding")
    end, e_off = bound(spec.args.get("end"), spec.args.get("end_side"), "current")
    if start == "unbounded_following":
        raise _unsupported("frame start cannot be UNBOUNDED FOLLOWING", table)
    if end == "unbounded_preceding":
        raise _unsupported("frame end cannot be UNBOUNDED PRECEDING", table)
    return Frame(mode=mode, start=start, end=end, start_offset=s_off, end_offset=e_off)


def _grouping_sets(gnode: exp.Group) -> tuple[list[exp.Expression], list[list[int]]]:
    """The grouping expressions of ``GROUP BY`` and, for ROLLUP/CUBE/GROUPING SETS, the
    sets as indexes into them (PostgreSQL's expansion: the product of the items' sets)."""
    exprs: list[exp.Expression] = []

    def index(e: exp.Expression) -> int:
        e = e.this if isinstance(e, exp.Paren) else e
        for i, x in enumerate(exprs):
            if x == e:
                return i
        exprs.append(e)
        return len(exprs) - 1

    items: list[exp.Expression] = list(gnode.expressions)
    for key in ("rollup", "cube", "grouping_sets"):
        items.extend(gnode.args.get(key) or [])
    plain: list[int] = []
    multi: list[list[list[int]]] = []
    for item in items:
        if isinstance(item, exp.Rollup):
            cols = [[index(x) for x in _tuple_items(e)] for e in item.expressions]
            multi.append([[i for c in cols[:k] for i in c] for k in range(len(cols), -1, -1)])
        elif isinstance(item, exp.Cube):
            cols = [[index(x) for x in _tuple_items(e)] for e in item.expressions]
            n = len(cols)
            multi.append(
                [
                    [i for k, c in enumerate(cols) if mask >> (n - 1 - k) & 1 for i in c]
                    for mask in range(2**n - 1, -1, -1)
                ]
            )
        elif isinstance(item, exp.GroupingSets):
            multi.append([[index(x) for x in _tuple_items(e)] for e in item.expressions])
        else:
            plain.append(index(item))
    if not multi:
        return exprs, []
    sets: list[list[int]] = [plain]
    for options in multi:
        sets = [a + b for a in sets for b in options]
    return exprs, [sorted(set(one), key=one.index) for one in sets]


def _tuple_items(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.Tuple):
        return list(e.expressions)
    if isinstance(e, exp.Paren):
        return [e.this]
    return [e]


def normalise(
    select: exp.Select,
    table: TableDecl,
    table_node: exp.Table,
    *,
    count_rows: str | None = None,
    lookups: Sequence[lookups_.Found] = (),
) -> Logical:
    """Normalise an accepted ``SELECT`` over ``table`` (already known to be the only table).

    ``count_rows``: the statement was ``SELECT count(*) AS <count_rows> FROM (select) q``: its
    result is the number of rows of ``select`` (see :mod:`rewriter.derived`). ``lookups``: the
    public relations it joins, taken out of it (:func:`rewriter.lookups.extract`)."""
    check_clauses(select, table)
    alias = table_node.args.get("alias")
    aliases = {table.name}
    if alias is not None and alias.this is not None:
        aliases = {ident(alias.this)}
    b = _Builder(table=table, aliases=frozenset(aliases))
    joins = lookups_.begin(b, lookups) if lookups else None
    table = b.table
    items = list(select.expressions)
    out_names = [output_name(e) for e in items]
    for e in items:
        if isinstance(unalias(e), exp.Star) or (
            isinstance(unalias(e), exp.Column) and isinstance(unalias(e).this, exp.Star)
        ):
            raise GroupingError(
                f"SELECT * cannot be combined with aggregates over protected table {table.name}",
                hint="name the columns, e.g. SELECT sex, count(*) ... GROUP BY sex",
            )

    # GROUP BY (input column names win over output aliases, as in PostgreSQL)
    group: list[PostExpr] = []
    sets: list[list[int]] = []
    gnode = select.args.get("group")
    if gnode is not None:
        raw, sets = _grouping_sets(gnode)
        slot: list[int] = []
        for g in raw:
            target = g
            n = _int_literal(g)
            if n is not None:
                if not 1 <= n <= len(items):
                    raise _position_error("GROUP BY", n)
                target = unalias(items[n - 1])
            elif isinstance(g, exp.Column) and not g.table:
                name = ident(g.this) if isinstance(g.this, exp.Identifier) else g.name.lower()
                if table.column_type(name) is None and name in out_names:
                    target = unalias(items[out_names.index(name)])
            ref = b.attr_ref(target, output=True)
            if ref is not None:
                attr = ref[0]
                if not attr.unit_bins:
                    raise _unsupported(f"GROUP BY {attr.name} (declared with bins wider than one value)", table,
                                       hint=f"group by columns with unit bins; {attr.name} can be used in WHERE at bin edges")  # fmt: skip
                ge: PostExpr = AttrRef(name=attr.name, pg_type=attr.pg_type)
            else:
                ge = b.cell(target)
            if ge not in group:
                group.append(ge)
            slot.append(group.index(ge))
        sets = [sorted({slot[i] for i in one}, key=[slot[i] for i in one].index) for one in sets]
    if (
        select.args.get("distinct") is not None
        and gnode is None
        and not any(isinstance(n, exp.AggFunc | exp.Window) for i in items for n in i.walk())
    ):
        # SELECT DISTINCT a, b without aggregates is GROUP BY a, b: the public values
        for item in items:
            ge = b.cell(unalias(item))
            if ge not in group:
                group.append(ge)
    group_t = tuple(group)

    def grouped(node: exp.Expression) -> PostExpr | None:
        """A grouped expression as its key (the same expression as a GROUP BY item)."""
        if not group_t or b.is_value(node):
            return None
        if any(isinstance(n, exp.AggFunc | exp.Window) for n in node.walk()):
            return None
        try:
            e = b.cell(node)
        except (UnsupportedError, UndefinedColumnError):
            return None
        if e in group_t:
            return KeyRef(index=group_t.index(e), pg_type=typeof(e))
        return None

    def post_leaf(node: exp.Expression) -> PostExpr | None:
        if isinstance(node, exp.Column):
            key = grouped(node)
            if key is not None:
                return key
            name = node.sql(dialect="postgres") if b.field(node) is not None else b.column(node)
            raise GroupingError(
                f"column {name} must appear in the GROUP BY clause or be used in an aggregate function"
            )
        if isinstance(node, exp.Window):
            return window(node)
        if isinstance(node, exp.Grouping):
            return grouping(node)
        bounded = interval_of(b, node)
        if bounded is not None:
            return bounded
        agg = b.aggregate(node)
        if agg is not None:
            return agg
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists):
            raise _unsupported("a subquery", table)
        return grouped(node)

    def grouping(node: exp.Grouping) -> PostExpr:
        keys: list[int] = []
        for arg in node.expressions:
            key = grouped(arg)
            if not isinstance(key, KeyRef):
                err = GroupingError(
                    "arguments to GROUPING must be grouping expressions of the associated "
                    "query level",
                    hint="write GROUPING(col) of a column of the GROUP BY (ROLLUP, CUBE, "
                    "GROUPING SETS)",
                )
                raise err
            keys.append(key.index)
        if len(keys) > 31:
            raise _unsupported("GROUPING with more than 31 arguments", table)
        return GroupingRef(keys=tuple(keys))

    def window(node: exp.Window) -> PostExpr:
        return window_function(b, node, post_leaf)

    def post(node: exp.Expression) -> PostExpr:
        return b.convert(node, post_leaf)

    outputs: list[PostExpr] = []
    columns: list[OutputColumn] = []
    for e, name in zip(items, out_names, strict=True):
        pe = post(unalias(e))
        typ = typeof(pe)
        if typ == "unknown":
            typ = "text"
            if isinstance(pe, Const):
                pe = Const(value=pe.value, pg_type="text")
        if typ not in TYPE_OIDS:
            raise _unsupported(f"a result of type {pgeval.sql_type(typ)}", table,
                               hint="an interval is returned as its seconds: extract(epoch FROM …)" if typ == "interval" else None)  # fmt: skip
        outputs.append(pe)
        columns.append(OutputColumn(name=name, type_oid=TYPE_OIDS[typ]))

    where_node = select.args.get("where")
    where = b.pred(where_node.this) if where_node is not None else None
    if joins is not None:
        where = joins.where(where)  # the inner joins' conditions

    having_node = select.args.get("having")
    having = post(having_node.this) if having_node is not None else None

    aliases_out = [output_name(i) for i in items if isinstance(i, exp.Alias)]
    order: list[OrderItem] = []
    onode = select.args.get("order")
    if onode is not None:
        for o in onode.expressions:
            expr = o.this
            n = _int_literal(expr)
            oname = output_name(expr) if isinstance(expr, exp.Column) and not expr.table else None
            if n is not None:
                if not 1 <= n <= len(items):
                    raise _position_error("ORDER BY", n)
                pe = outputs[n - 1]
            elif (
                oname is not None
                and oname in out_names
                and (oname in aliases_out or table.column_type(oname) is None)
            ):
                # an output name wins over an input column in ORDER BY (PostgreSQL)
                pe = outputs[out_names.index(oname)]
            else:
                pe = post(expr)
            nf = o.args.get("nulls_first")
            desc = bool(o.args.get("desc"))
            order.append(
                OrderItem(expr=pe, desc=desc, nulls_first=bool(nf) if nf is not None else None)
            )

    def bound(key: str) -> Value | None:
        return row_count(b, select, key)

    limit = bound("limit")
    offset = bound("offset")
    distinct = select.args.get("distinct") is not None
    if not b.measures and not group_t and not distinct:
        over = next((n for i in items for n in i.walk() if isinstance(n, exp.Window)), None)
        if over is not None:
            raise _unsupported(
                f"window function {sql_words(over.this).removeprefix('function ')} over the "
                "rows (no GROUP BY)",
                table,
                hint="window functions are answered over the grouped result: SELECT sex, "
                "count(*), sum(count(*)) OVER () FROM t GROUP BY sex",
            )
        raise _unsupported(
            "a statement without an aggregate", table, hint="add COUNT(*) to the select list"
        )

    measures, outputs_t, having_t, order_t = _canonical(
        b.measures, tuple(outputs), having, tuple(order)
    )
    if count_rows is not None and having_t is None and not distinct:
        # counting the groups of an aggregate without HAVING: the groups are public
        measures, outputs_t, order_t = (), (), ()
    nparams = max(b.params) + 1 if b.params else 0
    grouping_sets = tuple(tuple(x) for x in sets)
    joined_sql = ("", "")
    if joins is not None:
        token = _QUALIFIER.set(table.name)
        try:
            joined_sql = joins.sql(lambda p: _fmt_pred(p, None), lambda e: _fmt_expr(e, (), (), []))
        finally:
            _QUALIFIER.reset(token)
    template, bindings = make_template(
        table,
        outputs_t,
        where,
        group_t,
        grouping_sets,
        measures,
        having_t,
        order_t,
        distinct,
        joins=joined_sql,
    )
    if count_rows is not None:
        template = f"SELECT count(*) AS {count_rows} FROM ({template}) AS q"
        columns = [OutputColumn(name=count_rows, type_oid=TYPE_OIDS["int8"])]
    logical = Logical(
        table=table,
        columns=tuple(columns),
        outputs=outputs_t,
        where=where,
        group_by=group_t,
        measures=measures,
        having=having_t,
        order_by=order_t,
        limit=limit,
        offset=offset,
        param_types=tuple(b.params.get(i, 0) for i in range(nparams)),
        attributes=frozenset(b.attrs),
        template=template,
        bindings=tuple(bindings),
        grouping_sets=grouping_sets,
        distinct=distinct,
        count_rows=count_rows is not None,
        lookups=joins.lookups if joins is not None else (),
    )
    return lookups_.finish(logical) if joins is not None else logical


def union_logical(parts: Sequence[Logical], tree: exp.Union, distinct: bool) -> Logical:
    """The union of DP statements over one table: their columns (names of the first; each
    column's type must agree), their parameters, and the union's own ORDER BY (positions or
    output names), LIMIT and OFFSET."""
    first = parts[0]
    table = first.table
    if any(p.table.qualified != table.qualified for p in parts):
        raise UnsupportedError("a UNION of aggregates over different protected tables")
    for p in parts[1:]:
        if len(p.columns) != len(first.columns):
            err = UnsupportedError("each UNION query must have the same number of columns")
            err.sqlstate = "42601"  # type: ignore[misc]
            raise err
        for a, c in zip(first.columns, p.columns, strict=True):
            if a.type_oid != c.type_oid:
                err = UnsupportedError(
                    f"UNION types of column {a.name} do not match",
                    hint="cast the columns to one type in every branch, e.g. count(*)::numeric",
                )
                err.sqlstate = "42804"  # type: ignore[misc]
                raise err
    names = [c.name for c in first.columns]
    order: list[OrderItem] = []
    onode = tree.args.get("order")
    for o in onode.expressions if onode is not None else []:
        e = o.this
        n = _int_literal(e)
        if n is None and isinstance(e, exp.Column) and not e.table and output_name(e) in names:
            n = names.index(output_name(e)) + 1
        if n is None or not 1 <= n <= len(names):
            raise _unsupported(
                "ORDER BY of a UNION by an expression", table,
                hint="order a UNION by output column positions or names",
            )  # fmt: skip
        t = next(k for k, v in TYPE_OIDS.items() if v == first.columns[n - 1].type_oid)
        nf = o.args.get("nulls_first")
        order.append(
            OrderItem(expr=KeyRef(index=n - 1, pg_type=t), desc=bool(o.args.get("desc")),
                      nulls_first=bool(nf) if nf is not None else None)
        )  # fmt: skip

    def bound(key: str) -> int | None:
        v = row_count(_Builder(table=table, aliases=frozenset()), tree, key)
        if v is not None and not isinstance(v, int):
            raise _unsupported(f"a parameter in {key.upper()} of a UNION", table,
                               hint=f"write {key.upper()} <number>")  # fmt: skip
        return v

    params: dict[int, int] = {}
    for p in parts:
        for i, oid in enumerate(p.param_types):
            if oid or i not in params:
                params[i] = oid
    template = ""
    bindings: list[Value] = []
    for i, p in enumerate(parts):

        def shifted(m: re.Match[str], shift: int = len(bindings)) -> str:
            return f"${int(m.group(1)) + shift}"

        text = re.sub(r"\$(\d+)", shifted, p.template)
        template += ("" if i == 0 else (" UNION " if distinct else " UNION ALL ")) + text
        bindings.extend(p.bindings)
    if order:
        template += " ORDER BY " + ", ".join(
            f"{_key_index(o.expr) + 1}{' DESC' if o.desc else ''}" for o in order
        )
    nparams = max(params) + 1 if params else 0
    return Logical(
        table=table,
        columns=first.columns,
        outputs=(),
        where=None,
        group_by=(),
        measures=(),
        having=None,
        order_by=tuple(order),
        limit=bound("limit"),
        offset=bound("offset"),
        param_types=tuple(params.get(i, 0) for i in range(nparams)),
        attributes=frozenset().union(*(p.attributes for p in parts)),
        template=template,
        bindings=tuple(bindings),
        distinct=distinct,
        branches=tuple(parts),
    )


def _key_index(e: PostExpr) -> int:
    assert isinstance(e, KeyRef)
    return e.index


def _canonical(
    measures: list[Measure],
    outputs: tuple[PostExpr, ...],
    having: PostExpr | None,
    order: tuple[OrderItem, ...],
) -> tuple[tuple[Measure, ...], tuple[PostExpr, ...], PostExpr | None, tuple[OrderItem, ...]]:
    """Measures in a canonical order (by their printed form), so that the same question
    asked with its aggregates in another order is the same batch (a repeat stays free)."""
    order_idx = sorted(range(len(measures)), key=lambda j: _fmt_measure(measures[j]))
    new_index = {old: new for new, old in enumerate(order_idx)}

    def remap(x: object) -> object | None:
        if isinstance(x, AggRef):
            return dataclasses.replace(
                x,
                value=new_index[x.value],
                count=None if x.count is None else new_index[x.count],
                square=None if x.square is None else new_index[x.square],
            )
        return None

    return (
        tuple(measures[j] for j in order_idx),
        transform(outputs, remap),
        None if having is None else transform(having, remap),
        transform(order, remap),
    )


# --- templates ------------------------------------------------------------------------------
# A template is SQL that PostgreSQL and the rewriter read back as the same question (the
# predictor renders templates with new bindings and classifies them again).


#: The qualifier of the protected table's columns in a template with public relations (whose
#: columns may have the same names): its name, set by :func:`make_template`.
_QUALIFIER: contextvars.ContextVar[str] = contextvars.ContextVar("qualifier", default="")


def _attr_sql(name: str) -> str:
    name = clamp.source_of(name) or name  # a clamped column's values: the column
    q = _QUALIFIER.get()
    return f"{q}.{name}" if q else name


def _fmt_value(v: Value, bindings: list[Value]) -> str:
    if isinstance(v, Fraction):
        v = int(v) if v.denominator == 1 else Decimal(v.numerator) / Decimal(v.denominator)
    bindings.append(v)
    return f"${len(bindings)}"


def _fmt_pred(p: Pred, b: list[Value] | None) -> str:
    """SQL of a condition; its constants become ``$n`` in ``b`` (inline when ``b`` is None:
    a FILTER's constants shape the aggregate, as an expression's do)."""
    if isinstance(p, PCmp):
        attr = _attr_sql(p.attribute)
        if b is None:
            if isinstance(p.value, Param):
                return f"{attr} {p.op} ${p.value.index + 1}"
            return f"{attr} {p.op} {pgeval.literal_sql(_post_literal(p.value), '')}"
        return f"{attr} {p.op} {_fmt_value(p.value, b)}"
    if isinstance(p, PIsNull):
        return f"{_attr_sql(p.attribute)} IS NULL"
    if isinstance(p, PBool):
        return _attr_sql(p.attribute)
    if isinstance(p, PConst):
        return {True: "TRUE", False: "FALSE", None: "NULL"}[p.value]
    if isinstance(p, PExpr):
        return _fmt_expr(p.expr, (), (), b if b is not None else [])
    if p.op == "not":
        return f"NOT ({_fmt_pred(p.args[0], b)})"
    return "(" + f" {p.op.upper()} ".join(_fmt_pred(a, b) for a in p.args) + ")"


def _post_literal(v: object) -> object:
    if isinstance(v, Fraction):
        return int(v) if v.denominator == 1 else Decimal(v.numerator) / Decimal(v.denominator)
    return v


def _fmt_measure(m: Measure) -> str:
    """A measure's canonical text (the order of measures in a batch)."""
    arg = m.attribute or ("*" if m.expr is None else _fmt_expr(m.expr, (), (), []))
    text = f"{m.kind.value}({arg})"
    if m.filter is not None:
        text += f" FILTER (WHERE {_fmt_pred(m.filter, None)})"
    return text


_AGG_SQL = {
    "stddev_samp": "stddev_samp", "stddev_pop": "stddev_pop", "var_samp": "var_samp",
    "var_pop": "var_pop", "min": "min", "max": "max", "sum": "sum", "avg": "avg",
}  # fmt: skip


def _fmt_expr(
    e: PostExpr, group: tuple[PostExpr, ...], measures: Sequence[Measure], b: list[Value]
) -> str:
    """SQL for an IR expression (parameters become ``$n`` in ``b``; constants of
    expressions stay literal: they shape the question, as a bin width does)."""

    def f(x: PostExpr) -> str:
        return _fmt_expr(x, group, measures, b)

    if isinstance(e, AttrRef):
        return _attr_sql(e.name)
    if isinstance(e, KeyRef):
        return f(group[e.index]) if e.index < len(group) else "NULL"
    if isinstance(e, AggRef):
        m = measures[e.value] if e.value < len(measures) else Measure(kind=MeasureKind.COUNT_STAR)
        arg = m.attribute or ("*" if m.expr is None else f(m.expr))
        filt = f" FILTER (WHERE {_fmt_pred(m.filter, None)})" if m.filter is not None else ""
        if e.func == "count":
            text = f"count({arg})"
        elif e.func == "count_distinct":
            text = f"count(DISTINCT {arg})"
        elif e.func.startswith("percentile"):
            text = f"{e.func}({e.fraction}) WITHIN GROUP (ORDER BY {arg})"
        elif e.func == "mode":
            text = f"mode() WITHIN GROUP (ORDER BY {arg}{' DESC' if e.desc else ''})"
        elif m.kind is MeasureKind.COUNT_STAR:
            text = f"{e.func}({e.scale})"
        else:
            text = f"{_AGG_SQL[e.func]}({arg})"
        if e.bound:
            return f"lapras_interval_{e.bound}({text}{filt})"
        return text + filt
    if isinstance(e, Const):
        if isinstance(e.value, Param):
            return _fmt_value(e.value, b)
        return pgeval.literal_sql(e.value, e.pg_type)
    if isinstance(e, Compare | Arith):
        return f"({f(e.left)} {e.op} {f(e.right)})"
    if isinstance(e, Logic):
        if e.op == "not":
            return f"NOT ({f(e.args[0])})"
        return "(" + f" {e.op.upper()} ".join(f(a) for a in e.args) + ")"
    if isinstance(e, Func):
        args = pgtime.written_args(e.name, [f(a) for a in e.args])
        special = {
            "pg_time_tstz": lambda: f"CAST({args[0]} AS timestamp with time zone)",
            "isnull": lambda: f"({args[0]} IS NULL)",
            "like": lambda: f"({args[0]} LIKE {args[1]})",
            "ilike": lambda: f"({args[0]} ILIKE {args[1]})",
            "neg": lambda: f"(- {args[0]})",
            "distinct": lambda: f"({args[0]} IS DISTINCT FROM {args[1]})",
            "in": lambda: f"({args[0]} IN ({', '.join(args[1:])}))",
            "||": lambda: f"({args[0]} || {args[1]})",
            "extract": lambda: f"EXTRACT({getattr(e.args[0], 'value', '')!s} FROM {args[1]})",
            "lookup_field": lambda: str(getattr(e.args[-1], "value", "")),
        }.get(e.name)
        return special() if special is not None else f"{e.name}({', '.join(args)})"
    if isinstance(e, Case):
        whens = " ".join(f"WHEN {f(c)} THEN {f(v)}" for c, v in e.whens)
        default = f" ELSE {f(e.default)}" if e.default is not None else ""
        return f"CASE {whens}{default} END"
    if isinstance(e, Cast):
        mod = f"({', '.join(map(str, e.typmod))})" if e.typmod else ""
        return f"CAST({f(e.arg)} AS {pgeval.sql_type(e.pg_type)}{mod})"
    if isinstance(e, GroupingRef):
        return "GROUPING(" + ", ".join(f(KeyRef(index=k, pg_type="")) for k in e.keys) + ")"
    arg = f(e.arg) if e.arg is not None else ("*" if e.func == "count" else "")
    arg = ", ".join([arg, *(f(a) for a in e.args)]) if e.args else arg
    over = []
    if e.partition:
        over.append("PARTITION BY " + ", ".join(f(p) for p in e.partition))
    if e.order:
        over.append(
            "ORDER BY " + ", ".join(f(o.expr) + (" DESC" if o.desc else "") for o in e.order)
        )
    if e.frame is not None:
        words = {
            "unbounded_preceding": "UNBOUNDED PRECEDING",
            "unbounded_following": "UNBOUNDED FOLLOWING",
            "current": "CURRENT ROW",
        }
        fr = e.frame

        def side(kind: str, n: int) -> str:
            return words.get(kind) or f"{n} {kind.upper()}"

        over.append(
            f"{fr.mode.upper()} BETWEEN {side(fr.start, fr.start_offset)} AND "
            f"{side(fr.end, fr.end_offset)}"
        )
    return f"{e.func}({arg}) OVER ({' '.join(over)})"


def make_template(
    table: TableDecl,
    outputs: Sequence[PostExpr],
    where: Pred | None,
    group: tuple[PostExpr, ...],
    grouping_sets: tuple[tuple[int, ...], ...],
    measures: Sequence[Measure],
    having: PostExpr | None,
    order: Sequence[OrderItem],
    distinct: bool = False,
    joins: tuple[str, str] = ("", ""),
) -> tuple[str, list[Value]]:
    """Template text of the normalised statement (literals -> ``$n``) and its bindings.

    Printed from the normalised form, so it is stable across spacing, case, quoting, table
    and output aliases, ``GROUP BY 1`` and casts; it reads back as the same question. LIMIT
    and OFFSET are post-processing and not part of the template. ``joins``: the joins of the
    public relations after FROM, and their conditions (EXISTS ...) for the WHERE; the table's
    columns are then qualified with its name.
    """
    token = _QUALIFIER.set(table.name if joins[0] or joins[1] else "")
    try:
        return _template(
            table, outputs, where, group, grouping_sets, measures, having, order, distinct, joins
        )
    finally:
        _QUALIFIER.reset(token)


def _template(
    table: TableDecl,
    outputs: Sequence[PostExpr],
    where: Pred | None,
    group: tuple[PostExpr, ...],
    grouping_sets: tuple[tuple[int, ...], ...],
    measures: Sequence[Measure],
    having: PostExpr | None,
    order: Sequence[OrderItem],
    distinct: bool,
    joins: tuple[str, str],
) -> tuple[str, list[Value]]:
    b: list[Value] = []
    sel = ", ".join(_fmt_expr(o, group, measures, []) for o in outputs)
    text = f"SELECT {'DISTINCT ' if distinct else ''}{sel} FROM {table.qualified}{joins[0]}"
    if where is not None:
        text += " WHERE " + _fmt_pred(where, b) + (f" AND {joins[1]}" if joins[1] else "")
    elif joins[1]:
        text += " WHERE " + joins[1]
    if group:
        keys = [_fmt_expr(g, (), (), []) for g in group]
        if grouping_sets:
            sets = ", ".join("(" + ", ".join(keys[i] for i in one) + ")" for one in grouping_sets)
            text += f" GROUP BY GROUPING SETS ({sets})"
        else:
            text += " GROUP BY " + ", ".join(keys)
    if having is not None:
        text += " HAVING " + _fmt_expr(having, group, measures, b)
    if order:
        text += " ORDER BY " + ", ".join(
            _fmt_expr(o.expr, group, measures, [])
            + (" DESC" if o.desc else "")
            + (
                ""
                if o.nulls_first is None
                else (" NULLS FIRST" if o.nulls_first else " NULLS LAST")
            )
            for o in order
        )
    return text, b
