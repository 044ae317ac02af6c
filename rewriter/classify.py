"""Classify each statement of a query string: DP aggregate, zero-row probe, passthrough, refused.

The rule that keeps protected rows in: a statement that names a protected table anywhere (a
table reference in any subquery, CTE or DML, a string used as a regclass or as a function
argument, an unparsed command mentioning it) is either the accepted DP shape — one
``SELECT`` of COUNT/SUM/AVG over that single table — or a zero-row probe, or it is refused.
Everything else is relayed verbatim (or with statistics of protected tables hidden, see
:mod:`rewriter.guard`) to the upstream's low-privilege passthrough role.

>>> from rewriter.schema import load_schema  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias, TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dp.errors import InternalError, LaprasError

from . import cost, distinct_on, domaincheck, doors, lookups, pgtime, probes, sugar, units
from .compose import Composed, compose
from .derived import fold
from .dialect import POSTGRES
from .errors import (
    ACCEPTED,
    RowAccessError,
    SqlSyntaxError,
    UndefinedColumnError,
    UnsupportedError,
)
from .guard import (
    dangerous_literal,
    escaped_statistics,
    grant_select_visibility,
    guard_statistics,
    may_name_protected,
    mentions,
    mentions_pg_class,
    mentions_statistics,
    name_pattern,
)
from .names import cast_type, ident, output_name, unalias
from .normalise import (
    Logical,
    cast_words,
    normalise,
    union_logical,
)
from .normalise import sql_words as normalise_words
from .plan import OutputColumn, Plan
from .reduce import reduce
from .schema import SYSTEM_SCHEMAS, TYPE_OIDS, Schema, TableDecl
from .split import Piece, split_tokens, tokenize

# sqlglot logs a warning when it falls back to exp.Command; such statements are refused or
# relayed here, so the proxy may lower the "sqlglot" logger to ERROR.
_DIALECT = POSTGRES


@dataclass(frozen=True, slots=True, kw_only=True)
class Passthrough:
    """Relay ``sql`` to the upstream as the passthrough role (``rewritten``: statistics hidden)."""

    sql: str
    rewritten: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DPStatement:
    """A DP aggregate. ``plan`` is None until parameters are bound (see :func:`bind`)."""

    sql: str
    prepared: Logical
    plan: Plan | None
    columns: tuple[OutputColumn, ...]
    param_types: tuple[int, ...]  # OIDs for ParameterDescription (0: unknown)
    # The wire-level wrapper it came in (COPY (...) TO STDOUT, DECLARE ... CURSOR FOR,
    # PREPARE ... AS), None for the statement itself: see rewriter/wrappers.py.
    wrapper: wrappers.Wrapper | None = None

    @property
    def needs_params(self) -> bool:
        return bool(self.param_types)


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroRowProbe:
    """A statement over a protected table that returns no row whatever the data: answer with
    these columns and no rows (``SELECT 0``)."""

    sql: str
    columns: tuple[OutputColumn, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """Answer with ``error`` (a LaprasError: SQLSTATE, message, hint, position)."""

    sql: str
    error: LaprasError


Statement: TypeAlias = Passthrough | DPStatement | Composed | ZeroRowProbe | Refused
_E = TypeVar("_E", bound=BaseException)

_ROW_COMMANDS = (
    "COPY",
    "DECLARE",
    "EXPLAIN",
    "PREPARE",
    "EXECUTE",
    "CREATE",
    "FETCH",
    "MOVE",
    "INSERT",
    "WITH",
    "TABLE",
    "SELECT",
)


def classify(sql: str, schema: Schema, *, time_zone: str = "UTC") -> list[Statement]:
    """One :class:`Statement` per statement of ``sql`` (empty for an empty query).

    Works on a simple Query string (possibly several statements) and on the text of a Parse
    message (with ``$n`` parameters). Never raises: errors are returned as :class:`Refused`.
    ``time_zone``: the session's ``TimeZone`` (public), for the statements whose answer
    depends on it (``date_trunc`` of a date is a timestamp with time zone: rewriter.pgtime).
    """
    quick = _innocent(sql, schema)
    if quick is not None:
        return [quick]
    try:
        cost.spend_text(sql)  # before anything reads it (rewriter.cost)
    except cost.WorkLimitError as e:
        return [Refused(sql=sql, error=e)]
    tokens = tokenize(sql)
    try:
        pieces = split_tokens(sql, tokens)
    except MemoryError:  # the caller's limit (proxy.dp_workers), not the statement's fault
        raise
    except Exception:
        pieces = [Piece(text=sql, offset=0, tokens=None)]
    try:
        with pgtime.session_zone(time_zone):
            return [classify_piece(p, schema) for p in pieces]
    finally:
        # The pieces hold the tokens too: dropped first, the list then holds the last
        # reference to each token, and freeing them one by one (not all at once when the
        # pieces go) keeps the interpreter free for other threads meanwhile (_dismantle).
        del pieces
        while tokens:
            tokens.pop()


def _innocent(sql: str, schema: Schema) -> Passthrough | None:
    """The classification of one statement that certainly names nothing protected, found
    without tokenizing it (:func:`rewriter.guard.may_name_protected`); None otherwise.

    Exactly what :func:`classify_piece` gives such a statement: one piece (no ``;``), whose
    text starts at its first token (no comment before it) and is relayed as written.
    """
    if schema.passthrough_tables is not None or ";" in sql:
        return None
    text = sql.lstrip()  # the tokenizer's white space is str.isspace() too
    if not text or not (text[0].isascii() and (text[0].isalpha() or text[0] == "(")):
        return None
    if _DO.match(text) or doors.may_refuse(text) or may_name_protected(text, schema):
        return None
    text = text.rstrip()
    visible = grant_select_visibility(text, schema)
    return Passthrough(sql=visible or text, rewritten=visible is not None)


def _detached(e: _E) -> _E:
    """``e`` without its traceback and chained exceptions: a refusal is kept (in a route, a
    prepared statement) long after classification, and the frames of a traceback would keep
    the statement's whole parse tree and tokens alive with it."""
    e.__traceback__ = None
    e.__context__ = None
    e.__cause__ = None
    return e


def classify_piece(piece: Piece, schema: Schema) -> Statement:
    try:
        return _classify(piece, schema)
    except LaprasError as e:
        if e.position is not None:
            e.position += piece.offset
        return Refused(sql=piece.text, error=_detached(e))
    except RecursionError:
        return Refused(sql=piece.text, error=UnsupportedError("statement is nested too deeply"))
    except MemoryError:  # the caller's limit (proxy.dp_workers), not the statement's fault
        raise
    except Exception:  # a bug: refuse rather than relay
        return Refused(
            sql=piece.text, error=InternalError("internal error while classifying the statement")
        )


def bind(
    statement: DPStatement,
    params: Sequence[object],
    public: Mapping[str, Sequence[tuple[object, ...]]] | None = None,
) -> Plan:
    """Bind ``$1..$n`` (Python values, or text for untyped parameters) and reduce to a plan.
    ``public``: the rows of the declared public tables the statement joins (by qualified name,
    :func:`rewriter.lookups.pending`), as the epoch holds them."""
    logical = statement.prepared
    if public is not None and lookups.pending(logical):
        return reduce(lookups.filled(logical, public), params)
    return reduce(logical, params, reuse=True)


def _texts(piece: Piece) -> list[str]:
    if piece.tokens is None:
        return [piece.text]
    return [t.text for t in piece.tokens]


def _position(piece: Piece, err: ParseError) -> int | None:
    try:
        info = err.errors[0]
        line, col = int(info["line"]), int(info["col"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    lines = piece.text.split("\n")
    pos = sum(len(x) + 1 for x in lines[: line - 1]) + max(col - 1, 0)
    return pos + 1


def _refuse_mention(piece: Piece, names: set[str]) -> LaprasError:
    first = (_texts(piece)[:1] or [""])[0].upper()
    tables = ", ".join(sorted(names))
    command = first if first.isalpha() else "this statement"  # the command's keyword
    if first in _ROW_COMMANDS:
        return RowAccessError(
            f"{command} over protected table {tables} could reveal its rows and is refused",
            hint=f"only SELECT statements of aggregates are answered over it: {ACCEPTED}",
        )
    return UnsupportedError(
        f"{command} over protected table {tables} is not supported",
        hint=f"only SELECT statements of aggregates are answered over it: {ACCEPTED}",
    )


def _table_ref(node: exp.Table, schema: Schema) -> TableDecl | None:
    if not isinstance(node.this, exp.Identifier):
        return None
    name = ident(node.this)
    db = node.args.get("db")
    return schema.protected(name, ident(db) if db is not None else None)


_DO = re.compile(r"\s*DO\b", re.I)
#: Statements that carry another statement (EXPLAIN, DECLARE ... CURSOR FOR, PREPARE ... AS,
#: COPY (...) TO): found by the wrappers' own lexer, which reads comments, quoted names and
#: case as PostgreSQL does (rewriter/wrappers.py). The carried statement is classified; a
#: relayed one keeps the wrapper as written around it (psqlODBC's UseDeclareFetch, server-side
#: cursors, SQL PREPARE, EXPLAIN, COPY), a DP aggregate gets the wrapper's description.
from . import wrappers  # noqa: E402  (beside its one use, the wrapper's matcher)

_WRAPPER = wrappers.MATCHER


def _statistics_refusal() -> RowAccessError:
    return RowAccessError(
        "statement reads statistics and could not be checked",
        hint="statistics are hidden through the proxy; write catalogue queries without them",
    )


def _classify(piece: Piece, schema: Schema) -> Statement:
    pattern = name_pattern(schema)
    texts = _texts(piece)
    named = mentions(texts, pattern)
    statistics = mentions_statistics(texts)
    if _DO.match(piece.text):
        raise RowAccessError(
            "DO blocks are not relayed: the SQL they build at run time cannot be checked",
            hint="run the statements themselves",
        )
    words = texts if piece.tokens is not None else re.findall(r"\w+|=", piece.text)
    door = doors.refusal(words)  # ALTER ROLE, SET ROLE ... (rewriter/doors.py)
    if door is not None:
        raise door
    guarded = statistics or mentions_pg_class(texts)
    if not named and not guarded and schema.passthrough_tables is None:
        # Nothing protected, no statistic: relayed as written, without the cost of a parse
        # (the database refuses what the text could hide: see rewriter.guard).
        visible = grant_select_visibility(piece.text, schema)
        return Passthrough(sql=visible or piece.text, rewritten=visible is not None)
    wrapper = _WRAPPER.match(piece.text)
    if wrapper is not None:
        return _wrapped(piece, wrapper, schema)
    if escaped_statistics(piece.text):
        raise _statistics_refusal()
    try:
        if piece.tokens is not None and piece.offset == 0:
            trees = _DIALECT.parser().parse(list(piece.tokens), piece.text)
        else:
            trees = sqlglot.parse(piece.text, read=_DIALECT)
    except ParseError as e:
        if named:
            raise SqlSyntaxError(
                "syntax error (or syntax not supported) in a statement over protected table "
                + ", ".join(sorted(named)),
                position=_position(piece, e),
                hint=ACCEPTED,
            ) from None
        if statistics:
            raise _statistics_refusal() from None
        visible = grant_select_visibility(piece.text, schema)
        return Passthrough(sql=visible or piece.text, rewritten=visible is not None)
    except MemoryError:  # the caller's limit (proxy.dp_workers), not the statement's fault
        raise
    except Exception:  # tokenizer errors and sqlglot bugs
        if named or statistics:
            raise SqlSyntaxError(
                "statement could not be parsed", position=piece.offset + 1
            ) from None
        return Passthrough(sql=piece.text)
    found: list[exp.Expr] = [t for t in trees if t is not None]
    del trees
    try:
        return _classify_tree(piece, found, named, statistics, guarded, schema)
    finally:
        for t in found:
            _dismantle(t)


def _classify_tree(
    piece: Piece,
    found: list[exp.Expr],
    named: set[str],
    statistics: bool,
    guarded: bool,
    schema: Schema,
) -> Statement:
    """The classification of a parsed piece (``named``, ``statistics``, ``guarded``: what
    its tokens mention)."""
    if not found:
        return Passthrough(sql=piece.text)
    if len(found) != 1:
        raise SqlSyntaxError("several statements where one was expected")
    tree = found[0]
    census = _Census.of(tree)
    if census.command:
        if named:
            raise _refuse_mention(piece, named)
        if statistics:
            raise _statistics_refusal()
        return Passthrough(sql=piece.text)

    pattern = name_pattern(schema)
    refs = [(t, d) for t in census.tables if (d := _table_ref(t, schema)) is not None]
    # names of CTEs shadow tables, but a CTE named like a protected table is refused anyway
    for lit in census.strings:
        if mentions([str(lit.this)], pattern) and dangerous_literal(lit):
            raise RowAccessError(
                "a string naming protected table "
                + ", ".join(sorted(mentions([str(lit.this)], pattern)))
                + " is used as a relation and is refused",
                hint=ACCEPTED,
            )
    if not refs:
        _check_passthrough_tables(tree, schema)
        tokens = list(piece.tokens) if piece.tokens is not None and piece.offset == 0 else None
        try:
            hidden = guard_statistics(tree, piece.text, tokens) if guarded else None
        except ValueError:
            raise _statistics_refusal() from None
        text = hidden if hidden is not None else piece.text
        text = grant_select_visibility(text, schema) or text
        return Passthrough(sql=text, rewritten=text != piece.text)
    for t, decl in refs:
        if t.args.get("sample") is not None:
            raise _sampled(decl.name)
    sugar.expand(tree)  # ANY (ARRAY[...]), row comparisons: written out
    return _protected(piece, tree, refs, schema, census)


def _sampled(table: str) -> UnsupportedError:
    """TABLESAMPLE of a protected table, at any depth (a derived table is folded into the
    statement that reads it: the sample would otherwise be dropped and the whole table
    answered)."""
    return UnsupportedError(
        f"TABLESAMPLE of protected table {table} is not supported: a DP answer is computed "
        "over the whole table",
        hint="remove TABLESAMPLE: the answer's noise already stands in for sampling "
        "(and a fraction of a count is the count times that fraction)",
    )


_STRINGS = (exp.Literal, exp.RawString, exp.National, exp.UnicodeString, exp.ByteString)


@dataclass(slots=True)
class _Census:
    """What the checks need to know of a whole tree, gathered in one walk (on a statement of
    a megabyte each walk costs about half a second)."""

    command: bool = False  # an exp.Command anywhere: sqlglot did not parse part of it
    tables: list[exp.Table] = field(default_factory=list)  # in walk order
    strings: list[exp.Expr] = field(default_factory=list)  # string literals, in walk order
    nested: bool = False  # a SELECT or a subquery below the root
    aggregate: bool = False  # an aggregate function anywhere

    @classmethod
    def of(cls, tree: exp.Expr) -> _Census:
        c = cls()
        for n in tree.walk():
            if isinstance(n, exp.Command):
                c.command = True
            elif isinstance(n, exp.Table):
                c.tables.append(n)
            elif isinstance(n, _STRINGS):
                if not (isinstance(n, exp.Literal) and not n.is_string):
                    c.strings.append(n)
            elif isinstance(n, exp.AggFunc):
                c.aggregate = True
            if n is not tree and isinstance(n, exp.Subquery | exp.Select):
                c.nested = True
        return c


def _dismantle(tree: exp.Expr) -> None:
    """Free a parse tree now, a node at a time.

    sqlglot's nodes point to their parents, so a tree is a web of cycles that only the
    garbage collector frees: until a full collection runs the memory stays taken, and a full
    collection over the tree of a big statement holds the interpreter (every thread, the
    proxy's event loop too) for up to a second. Cutting each node from its children, deepest
    first, lets reference counting free the tree as it goes. Nothing classified keeps a node
    (results hold names, values and text)."""
    nodes = list(tree.walk())
    while nodes:
        node = nodes.pop()
        node.parent = None
        node.args.clear()


def _wrapped(piece: Piece, wrapper: wrappers.Located, schema: Schema) -> Statement:
    """EXPLAIN / DECLARE ... CURSOR FOR / PREPARE ... AS / COPY (...) TO: the statement they
    carry decides. A relayed one keeps the wrapper as written around it (rewritten inside when
    it must be); a DP aggregate gets the wrapper's description (COPY's options, the cursor's,
    the prepared statement's name and types, with PostgreSQL's errors); EXPLAIN of a
    statement over a protected table is refused (its estimates come from the data)."""
    from dataclasses import replace

    start, end = wrapper.start, wrapper.end
    inner = classify_piece(Piece(text=piece.text[start:end], offset=start, tokens=None), schema)
    if isinstance(inner, Refused):
        raise inner.error
    if isinstance(inner, Passthrough):
        return Passthrough(
            sql=piece.text[:start] + inner.sql + piece.text[end:], rewritten=inner.rewritten
        )
    table = ", ".join(sorted(mentions([piece.text[start:end]], name_pattern(schema))))
    if wrapper.kind == "explain":
        raise RowAccessError(
            f"EXPLAIN of a statement over protected table {table} is refused: its estimates "
            "come from the data",
            hint="run the aggregate itself for a differentially private answer",
        )
    if isinstance(inner, ZeroRowProbe):
        # psqlODBC's DECLARE ... CURSOR WITH HOLD FOR <probe> (UseDeclareFetch): the probe as
        # a statement of public values with no row, in its wrapper (rewriter.probes)
        decl = schema.tables[table.split(", ")[0]]
        inner = _dp(inner.sql, probes.zero_rows(decl, inner.columns, inner.sql))
    described = wrappers.describe(wrapper, piece.text, [c.name for c in inner.columns])
    return replace(inner, sql=piece.text, wrapper=described)


def _check_passthrough_tables(tree: exp.Expr, schema: Schema) -> None:
    allowed = schema.passthrough_tables
    if allowed is None:
        return
    ctes = {
        ident(c.args["alias"].this)
        for c in tree.find_all(exp.CTE)
        if c.args.get("alias") is not None
    }
    for t in tree.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier):
            continue
        name = ident(t.this)
        db = ident(t.args.get("db")) if t.args.get("db") is not None else None
        if db in SYSTEM_SCHEMAS or name.startswith("pg_") or (db is None and name in ctes):
            continue
        if f"{db or 'public'}.{name}" not in allowed:
            raise RowAccessError(
                f"table {name} is neither protected nor declared as a passthrough table",
                hint="add it to [passthrough].tables in lapras.toml",
            )


def _is_false(node: exp.Expr | None) -> bool:
    """Whether a WHERE condition is constant false (no column involved)."""
    if node is None:
        return False
    constant = False
    for n in node.walk():
        if isinstance(n, exp.Parameter | exp.Placeholder | exp.Query | exp.Subquery):
            return False
        if isinstance(n, exp.Boolean) or (
            isinstance(n, exp.Predicate)
            and isinstance(n, exp.Binary)
            and n.find(exp.Column) is None
        ):
            constant = True
        if isinstance(n, exp.Func) and not isinstance(n, exp.Connector | exp.Predicate | exp.Not):
            return False
    if not constant:  # no constant to fold: simplify (slow) cannot yield FALSE
        return False
    try:
        from sqlglot.optimizer.simplify import simplify

        s = simplify(node.copy())
    except Exception:
        return False
    return isinstance(s, exp.Boolean) and not s.this


def _limit_zero(select: exp.Select) -> bool:
    node = select.args.get("limit")
    if node is None:
        return False
    e = (
        node.args.get("count")
        if isinstance(node, exp.Fetch)
        else node.args.get("expression") or node.this
    )
    return isinstance(e, exp.Literal) and not e.is_string and str(e.this).strip() in ("0", "0.0")


def _probe_columns(select: exp.Select, table: TableDecl) -> tuple[OutputColumn, ...]:
    cols: list[OutputColumn] = []
    for col in select.find_all(exp.Column):
        if isinstance(col.this, exp.Star):
            continue
        name = ident(col.this) if isinstance(col.this, exp.Identifier) else col.name.lower()
        if table.column_type(name) is None:
            raise UndefinedColumnError(
                f"column {name} does not exist in protected table {table.name}",
                hint=f"declared columns: {', '.join(c for c, _ in table.columns)}",
            )
    for item in select.expressions:
        inner = unalias(item)
        if isinstance(inner, exp.Star) or (
            isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)
        ):
            cols.extend(OutputColumn(name=c, type_oid=TYPE_OIDS[t]) for c, t in table.columns)
            continue
        cols.append(OutputColumn(name=output_name(item), type_oid=_probe_type(inner, table)))
    return tuple(cols)


def _probe_type(node: exp.Expr, table: TableDecl) -> int:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast):
        t = cast_type(node)
        if t is None:
            raise UnsupportedError(
                f"a cast to type {cast_words(node)} in a zero-row probe of protected table "
                f"{table.name} is not supported",
                hint="cast to a type of the table's columns, or send the probe without the cast",
            )
        return TYPE_OIDS[t]
    if isinstance(node, exp.Column):
        name = ident(node.this) if isinstance(node.this, exp.Identifier) else node.name.lower()
        return TYPE_OIDS[table.column_type(name) or "text"]
    if isinstance(node, exp.Boolean):
        return 16
    if isinstance(node, exp.Literal):
        if node.is_string:
            return 25
        text = str(node.this)
        return 23 if text.isdigit() and int(text) < 2**31 else 1700
    if isinstance(node, exp.Count):
        return 20
    if isinstance(node, exp.Avg):
        return 1700
    if isinstance(node, exp.Sum):
        arg = node.this
        if isinstance(arg, exp.Column):
            t = table.column_type(
                ident(arg.this) if isinstance(arg.this, exp.Identifier) else arg.name.lower()
            )
            return 20 if t in ("int2", "int4") else (701 if t == "float8" else 1700)
        return 20
    if isinstance(node, exp.Null):
        return 25
    raise UnsupportedError(
        f"{normalise_words(node) if isinstance(node, exp.Expression) else 'this'} in the "
        f"select list of a zero-row probe of protected table "
        f"{table.name} is not supported",
        hint="a probe's select list may hold columns, constants, casts and count/sum/avg",
    )


def _protected(
    piece: Piece,
    tree: exp.Expr,
    refs: list[tuple[exp.Table, TableDecl]],
    schema: Schema,
    census: _Census,
) -> Statement:
    if sugar.over_parameter(tree):  # x = ANY($1): planned when executed, the array bound
        return _composed(piece, tree, schema)
    if isinstance(tree, exp.Union):
        union = _union(piece, tree, schema)
        return union if union is not None else _composed(piece, tree, schema)
    # count(DISTINCT unit) beside other aggregates; DISTINCT ON: post-processing of the rows
    both = units.split(tree, schema) or distinct_on.split(tree)
    if both is not None:  # planned from its text, now and again at execution
        text = both.sql(dialect=_DIALECT)
        parsed = sqlglot.parse_one(text, read=_DIALECT)
        return replace(compose(piece.text, parsed, schema, single_part), query=text)
    try:
        st = _single(piece, tree, refs, schema, census)
    except units.ParameterInUnits:  # planned when executed, with the values bound
        return _composed(piece, tree, schema)
    if st is not None:
        return st
    if isinstance(tree, exp.Query) and census.aggregate:
        # several DP aggregates combined: a plan of releases and post-processing
        return _composed(piece, tree, schema)
    names = sorted({d.name for _, d in refs})
    what = "this statement returns" if isinstance(tree, exp.Query) else f"{tree.key.upper()} reads"
    raise RowAccessError(
        "row-level access to protected table "
        + ", ".join(names)
        + f" is refused: {what} its rows (no aggregate)",
        hint=f"{ACCEPTED}; zero-row probes (LIMIT 0, WHERE 1 = 0) are answered with the columns",
    )


def _composed(piece: Piece, tree: exp.Expr, schema: Schema) -> Statement:
    """A statement made of several DP aggregates: a plan of releases and post-processing
    (rewriter/compose.py), checked now with stand-in answers."""
    return compose(piece.text, tree, schema, single_part)


def single_statement(sql: str, tree: exp.Expr, schema: Schema) -> Statement | None:
    """``tree`` as one statement over a protected table (a DP aggregate, public values, a
    zero-row probe), with its refusal when it is that shape but not answered (a row read, an
    unknown column, ...); None when it is not one statement over the table but a composition
    (rewriter/compose.py plans those, calling this for each part)."""
    census = _Census.of(tree)
    refs = [(t, d) for t in census.tables if (d := _table_ref(t, schema)) is not None]
    if not refs:
        return None
    piece = Piece(text=sql, offset=0, tokens=None)
    if isinstance(tree, exp.Union):
        return _union(piece, tree, schema)
    return _single(piece, tree, refs, schema, census)


def single_part(
    sql: str, tree: exp.Expression, schema: Schema
) -> tuple[Plan | None, tuple[OutputColumn, ...]] | None:
    """A part of a composed statement as one statement (:func:`single_statement`): its plan
    and columns, or (None, columns) for a zero-row probe; None when it is not one."""
    st = single_statement(sql, tree, schema)
    if st is None:
        return None
    if isinstance(st, ZeroRowProbe):
        return None, st.columns
    if isinstance(st, DPStatement) and st.plan is not None:
        return st.plan, st.columns
    if isinstance(st, Refused):
        raise st.error
    return None  # a composition itself (a UNION of composed branches)


def _single(
    piece: Piece,
    tree: exp.Expr,
    refs: list[tuple[exp.Table, TableDecl]],
    schema: Schema,
    census: _Census,
) -> Statement | None:
    """The one DP statement (or zero-row probe) ``tree`` is, folding the wrappers tools put
    around one table (rewriter/derived.py); None when it is not that shape."""
    select = tree if isinstance(tree, exp.Select) else None
    probe = None  # an existence check or a limited row count: the count it means
    if select is not None:
        probe = probes.rewrite(select, lambda t: _table_ref(t, schema))
        if probe is not None:
            select = probe
            census = _Census.of(select)
            refs = [(t, d) for t in census.tables if (d := _table_ref(t, schema)) is not None]
    found: tuple[lookups.Found, ...] = ()
    if select is not None:  # joins with public relations: taken out, kept aside
        got = lookups.extract(select, schema, lambda t: _table_ref(t, schema))
        if got is not None:
            select, found = got
            census = _Census.of(select)
            refs = [(t, d) for t in census.tables if (d := _table_ref(t, schema)) is not None]
    # a question about units: the statement over the derived relation of units (units.py)
    per_unit = units.rewrite(select.copy(), schema) if select is not None else None
    if per_unit is not None:
        if found:
            raise UnsupportedError(
                "a question about the units of a protected table joined to a public relation "
                "is not supported",
                hint="ask about the units without the join (its values as a CASE expression)",
            )
        select = per_unit[0]
        tree, census = select, _Census.of(select)
        refs = [(t, d) for t in census.tables if (d := _table_ref(t, schema)) is not None]
    from_ = select.args.get("from_") if select is not None else None
    single = (
        select is not None
        and from_ is not None
        and isinstance(from_.this, exp.Table)
        and len(refs) == 1
        and refs[0][0] is from_.this
        and not select.args.get("joins")
        and not select.args.get("with_")
        and not select.args.get("laterals")
        and not census.nested
    )
    aggregated = census.aggregate  # COUNT, SUM and AVG are aggregate functions too
    count_rows: str | None = None
    if not single and select is not None:
        folded = fold(select)
        if folded is not None:
            merged, count_rows = folded
            inner = _Census.of(merged)
            mrefs = [(t, d) for t in inner.tables if (d := _table_ref(t, schema)) is not None]
            mfrom = merged.args.get("from_")
            if (
                len(mrefs) == 1
                and mfrom is not None
                and mrefs[0][0] is mfrom.this
                and not inner.nested
                and len(inner.tables) == 1
            ):
                select, refs, census, single = merged, mrefs, inner, True
                aggregated = inner.aggregate
    if not single or select is None:
        return None
    table = refs[0][1]
    table_node = refs[0][0]
    if per_unit is not None:
        table, select = per_unit[1], units.finish(select, per_unit[1])
        table_node = select.args["from_"].this
    if select.args.get("locks"):
        raise RowAccessError(f"locking rows of protected table {table.name} is refused")
    if select.args.get("into"):
        raise RowAccessError(f"SELECT INTO from protected table {table.name} is refused")
    grouped = select.args.get("group") is not None
    if _limit_zero(select) or (
        _is_false((select.args.get("where") or exp.Where()).this) and (grouped or not aggregated)
    ):
        for n in select.walk():
            if isinstance(n, exp.Subquery | exp.Join | exp.Command) and isinstance(
                n, exp.Expression
            ):
                raise UnsupportedError(
                    f"{normalise_words(n)} in a zero-row probe of protected table {table.name} "
                    "is not supported",
                    hint="send the probe over the table alone: SELECT * FROM t WHERE 1 = 0",
                )
        return ZeroRowProbe(sql=piece.text, columns=_probe_columns(select, table))
    if not aggregated and not grouped and select.args.get("distinct") is None:
        raise RowAccessError(
            f"row-level access to protected table {table.name} is refused: this SELECT "
            "returns its rows (no aggregate)",
            hint=f"{ACCEPTED}; zero-row probes (LIMIT 0, WHERE 1 = 0) are answered with the "
            "columns",
        )
    logical = normalise(select, table, table_node, count_rows=count_rows, lookups=found)
    if isinstance(table, units.UnitsTable):
        logical = units.described(logical, table)
    return _dp(piece, probes.exists(logical) if probe is not None else logical)


def _union(piece: Piece, tree: exp.Union, schema: Schema) -> Statement | None:
    """``UNION [ALL]`` of DP aggregates over one protected table: one statement, one batch,
    one charge (the branches' rows stacked), the rows concatenated (and deduplicated for
    UNION) by post-processing, then the union's ORDER BY / LIMIT / OFFSET. None when a
    branch is not one DP aggregate over the table (a composition: rewriter/compose.py)."""
    distinct = bool(tree.args.get("distinct"))
    if tree.args.get("with_") or tree.args.get("with"):
        return None
    branches: list[exp.Expr] = []

    def flatten(node: exp.Expr) -> None:
        # nested unions of the same kind, without their own ORDER BY / LIMIT, are one union
        if isinstance(node, exp.Union) and (
            node is tree
            or (
                bool(node.args.get("distinct")) == distinct
                and not any(node.args.get(k) for k in ("order", "limit", "offset"))
            )
        ):
            flatten(node.this)
            flatten(node.expression)
        else:
            branches.append(node.this if isinstance(node, exp.Subquery) else node)

    flatten(tree)
    parts: list[Logical] = []
    for branch in branches:
        if not isinstance(branch, exp.Select):
            return None
        census = _Census.of(branch)
        refs = [(t, d) for t in census.tables if (d := _table_ref(t, schema)) is not None]
        if not refs:
            return None  # constant rows beside aggregates: post-processing
        st = _single(piece, branch, refs, schema, census)
        if st is None and not census.aggregate:
            raise RowAccessError(
                "row-level access to protected table "
                + ", ".join(sorted({d.name for _, d in refs}))
                + " is refused",
                hint="each branch of a UNION over a protected table must be an aggregate",
            )
        if isinstance(st, DPStatement) and isinstance(st.prepared.table, units.UnitsTable):
            return None  # a question about units: a release of its own (a composition)
        if not isinstance(st, DPStatement):
            return None
        if st.prepared.lookups:
            return None  # a join with a public relation: each branch a release of its own
        parts.append(st.prepared)
    tables = {p.table.qualified for p in parts}
    if len(tables) > 1:
        return None  # aggregates of two protected tables: a release on each
    return _dp(piece, union_logical(parts, tree, distinct))


def _dp(piece: Piece | str, logical: Logical) -> DPStatement:
    """The DP statement of a normalised query (planned now unless it has parameters)."""
    logical = domaincheck.marked(logical)
    return DPStatement(
        sql=piece if isinstance(piece, str) else piece.text,
        prepared=logical,
        plan=reduce(logical) if not logical.param_types and not lookups.pending(logical) else None,
        columns=logical.columns,
        param_types=logical.param_types,
    )
