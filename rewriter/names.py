"""The names PostgreSQL gives: identifiers folded, a cast's type, a select-list item's column.

Read from sqlglot nodes, as PostgreSQL's parser names them (``FigureColname``): used wherever
a statement's output columns or relations are named (normalisation, wrappers, composed
statements, public relations).

>>> import sqlglot
>>> items = sqlglot.parse_one('SELECT "Sex", count(*), 1::text, age AS "A" FROM t').expressions
>>> [output_name(e) for e in items]
['Sex', 'count', 'text', 'A']
"""

from __future__ import annotations

from sqlglot import exp

_DTYPES: dict[str, str] = {
    "INT": "int4", "SMALLINT": "int2", "BIGINT": "int8", "DECIMAL": "numeric", "TEXT": "text",
    "VARCHAR": "varchar", "CHAR": "bpchar", "BOOLEAN": "bool", "DATE": "date", "DOUBLE": "float8",
    "FLOAT": "float4", "BPCHAR": "bpchar", "TIMESTAMP": "timestamp", "TIMESTAMPTZ": "timestamptz",
    "INTERVAL": "interval",
}  # fmt: skip


_NAMES: dict[type[exp.Expression], str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev", exp.StddevPop: "stddev_pop", exp.StddevSamp: "stddev_samp",
    exp.Variance: "variance", exp.VariancePop: "var_pop", exp.PercentileCont: "percentile_cont",
    exp.PercentileDisc: "percentile_disc", exp.Round: "round", exp.Floor: "floor",
    exp.Ceil: "ceil", exp.Abs: "abs", exp.Sign: "sign", exp.Trunc: "trunc", exp.Lower: "lower",
    exp.Upper: "upper", exp.Coalesce: "coalesce", exp.Nullif: "nullif",
    exp.Greatest: "greatest", exp.Least: "least", exp.Length: "length",
    exp.Substring: "substring", exp.WidthBucket: "width_bucket", exp.Extract: "extract",
    exp.TimestampTrunc: "date_trunc", exp.DateTrunc: "date_trunc", exp.Trim: "btrim",
    exp.Concat: "concat", exp.Case: "case", exp.RowNumber: "row_number", exp.Rank: "rank",
    exp.DenseRank: "dense_rank", exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist",
    exp.Ntile: "ntile", exp.Lag: "lag", exp.Lead: "lead", exp.FirstValue: "first_value",
    exp.LastValue: "last_value", exp.NthValue: "nth_value", exp.Mode: "mode",
    exp.Grouping: "grouping",
    exp.Date: "date", exp.AtTimeZone: "timezone", exp.Interval: "interval",
    exp.MakeInterval: "make_interval", exp.Left: "left", exp.Right: "right",
    exp.Replace: "replace", exp.ConcatWs: "concat_ws", exp.Initcap: "initcap",
    exp.SplitPart: "split_part", exp.StrPosition: "position", exp.StartsWith: "starts_with",
    exp.Reverse: "reverse", exp.MD5: "md5", exp.Repeat: "repeat", exp.Ascii: "ascii",
    exp.Chr: "chr", exp.Sqrt: "sqrt", exp.Cbrt: "cbrt", exp.Exp: "exp", exp.Ln: "ln",
    exp.Log: "log", exp.Pi: "pi", exp.Degrees: "degrees", exp.Radians: "radians",
    exp.Sin: "sin", exp.Cos: "cos",
}  # fmt: skip


#: TRIM's position -> the function PostgreSQL's parser calls for it.
TRIMS = {"BOTH": "btrim", "LEADING": "ltrim", "TRAILING": "rtrim"}


def ident(node: exp.Identifier | str | None) -> str:
    """PostgreSQL's folding: unquoted identifiers are lower-cased."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.lower()
    return str(node.this) if node.quoted else str(node.this).lower()


def cast_type(node: exp.Cast) -> str | None:
    """Canonical PostgreSQL type name of a cast target, if it is one we understand."""
    to = node.args.get("to")
    if not isinstance(to, exp.DataType):
        return None
    name = to.this.name if hasattr(to.this, "name") else str(to.this)
    return _DTYPES.get(str(name).upper())


def output_name(node: exp.Expression) -> str:
    """The column name PostgreSQL gives a select-list item (FigureColname)."""
    if isinstance(node, exp.Alias):
        return ident(node.args["alias"])
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Cast):
        below = output_name(inner.this)
        if below != "?column?":
            return below
        return cast_type(inner) or "?column?"
    if isinstance(inner, exp.Column):
        return ident(inner.this) if isinstance(inner.this, exp.Identifier) else inner.name.lower()
    if isinstance(inner, exp.Window | exp.Filter | exp.WithinGroup):
        return output_name(inner.this)
    written = inner.meta.get("pg_name") if isinstance(inner, exp.Func) else None
    if isinstance(written, str) and written.isidentifier():
        return written.lower()  # the name as written (rewriter.dialect)
    if isinstance(inner, exp.Pad):
        return "lpad" if inner.args.get("is_left") else "rpad"
    if isinstance(inner, exp.Trim):  # TRIM(LEADING ...) is ltrim, as PostgreSQL's parser writes it
        return TRIMS.get(str(inner.args.get("position") or "BOTH").upper(), "btrim")
    name = _NAMES.get(type(inner))
    if name is not None:
        return name
    if isinstance(inner, exp.Anonymous):
        return inner.name.lower()
    if isinstance(inner, exp.Boolean):
        return "bool"
    return "?column?"


def unalias(node: exp.Expression) -> exp.Expression:
    """``node`` without its alias."""
    return node.this if isinstance(node, exp.Alias) else node


__all__ = ["TRIMS", "cast_type", "ident", "output_name", "unalias"]
