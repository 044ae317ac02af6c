"""Guard relayed statements: every statistic hidden, every tool still working.

Statistics are protected in two layers (docs/privacy.md, "What is protected, and where"):

1. **The database.** ``lapras provision`` takes ``SELECT`` on ``pg_class.reltuples``,
   ``relpages`` and ``relallvisible``, and ``EXECUTE`` on every function that
   :func:`restricted_function` names (statistics, sizes, locks, WAL positions), away from
   ``PUBLIC``; analysts act upstream as roles without them. PostgreSQL itself then refuses
   whole-row references, ``row_to_json(pg_class)``, ``query_to_xml`` and ``DO`` with 42501,
   whatever SQL is built at run time.
2. **This pass**, so that catalogue queries of tools do not meet that 42501. A relayed statement
   is rewritten, by splicing its own text (everything else stays byte for byte):

   - every reference to ``pg_class`` as a relation becomes a derived table with the same
     columns in the same order, the three statistics ``NULL``: ``SELECT *``, ``c.*``,
     whole-row ``c``, ``row_to_json(c)`` and ``c::text`` all work and show no statistic;
   - every statistics relation (:func:`restricted_relation`: ``pg_stat_*``, ``pg_statio_*``,
     ``pg_locks`` ...) becomes an empty relation of its own row type,
     ``(SELECT (NULL::pg_catalog.<name>).* WHERE false)``;
   - every call of a restricted function in an expression becomes
     ``CASE WHEN false THEN <the call> END``: PostgreSQL's planner folds it to a NULL of the
     function's own result type, so the function is neither run nor privilege-checked.

   Statistics are hidden for every relation, not only protected ones: that is the only rule
   the database can enforce, and it needs no knowledge of which relation is which.

What cannot be parsed and mentions a statistic (or a name spelled with escapes) is refused with
42501: without the database layer (a managed service that does not allow it) the text is all
the proxy has. See docs/sql.md, "Statistics".

>>> guard_statistics(sqlglot.parse_one("SELECT pg_table_size(oid) FROM t", read="postgres"),
...                  "SELECT pg_table_size(oid) FROM t")
'SELECT CASE WHEN false THEN pg_table_size(oid) END AS pg_table_size FROM t'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokenizer_core import Token, TokenType

from .schema import Schema

STAT_COLUMNS = frozenset({"reltuples", "relpages", "relallvisible"})

#: The columns of pg_class, in order (PostgreSQL 12 to 17), with the statistics as NULL of
#: their own types.
_PG_CLASS_COLUMNS = (
    "oid", "relname", "relnamespace", "reltype", "reloftype", "relowner", "relam",
    "relfilenode", "reltablespace", "NULL::integer AS relpages", "NULL::real AS reltuples",
    "NULL::integer AS relallvisible", "reltoastrelid", "relhasindex", "relisshared",
    "relpersistence", "relkind", "relnatts", "relchecks", "relhasrules", "relhastriggers",
    "relhassubclass", "relrowsecurity", "relforcerowsecurity", "relispopulated", "relreplident",
    "relispartition", "relrewrite", "relfrozenxid", "relminmxid", "relacl", "reloptions",
    "relpartbound",
)  # fmt: skip
PG_CLASS_WITHOUT_STATISTICS = (
    "(SELECT " + ", ".join(_PG_CLASS_COLUMNS) + " FROM pg_catalog.pg_class)"
)
#: PostgreSQL's system columns, which no ``*`` shows; the lockdown grants them on pg_class, and
#: the rewrite carries those a statement names (DBD::Pg joins on ``c.tableoid``).
SYSTEM_COLUMNS = ("tableoid", "ctid", "xmin", "cmin", "xmax", "cmax")


def _pg_class_without_statistics(system: Iterable[str]) -> str:
    """The rewrite of pg_class, with the ``system`` columns after its own (named by the
    statement: PostgreSQL shows them only when named, the derived table only if it has them).
    """
    extra = "".join(f", {c}" for c in SYSTEM_COLUMNS if c in set(system))
    return PG_CLASS_WITHOUT_STATISTICS.replace(
        " FROM pg_catalog.pg_class)", extra + " FROM pg_catalog.pg_class)"
    )


#: Statistics relations that PostgreSQL itself restricts to one's own sessions.
_KEPT_RELATIONS = frozenset({"pg_stat_activity", "pg_stat_ssl", "pg_stat_gssapi"})
#: The functions behind them (they show other roles' sessions without their statements).
_KEPT_FUNCTIONS = frozenset({"pg_stat_get_activity"})
#: Functions outside the pg_stat_ families that reveal sizes, counters, locks or write volume:
#: core PostgreSQL, then the contrib modules an operator may have installed.
_COUNTER_FUNCTIONS = frozenset(
    {
        "pg_relation_size", "pg_table_size", "pg_indexes_size", "pg_total_relation_size",
        "pg_database_size", "pg_tablespace_size", "pg_lock_status", "pg_current_wal_lsn",
        "pg_current_wal_insert_lsn", "pg_current_wal_flush_lsn", "pg_last_wal_receive_lsn",
        "pg_last_wal_replay_lsn", "pg_control_checkpoint", "pg_control_system",
        "pg_control_init", "pg_control_recovery",
        "pg_relpages", "pg_freespace", "pg_visibility", "pg_visibility_map",
        "pg_visibility_map_summary", "pg_check_frozen", "pg_check_visible", "pgrowlocks",
        "pg_buffercache_pages", "pg_buffercache_summary", "pg_buffercache_usage_counts",
        "get_raw_page", "heap_page_items", "bt_metap", "bt_page_stats", "bt_page_items",
        "page_header", "pg_get_wal_records_info", "pg_get_wal_stats", "pg_get_wal_block_info",
    }
)  # fmt: skip
_RESTRICTED_OTHER_RELATIONS = frozenset(
    {"pg_locks", "pg_buffercache", "pg_statistic", "pg_statistic_ext_data"}
)


def restricted_function(name: str) -> bool:
    """Whether a function gives statistics of relations, the database or the cluster
    (``lapras provision`` revokes it from PUBLIC; a relayed call reads NULL)."""
    n = name.lower()
    if n in _KEPT_FUNCTIONS or n.startswith("pg_stat_get_backend_"):
        return False
    return n.startswith(("pg_stat_", "pg_statio_", "pgstat")) or n in _COUNTER_FUNCTIONS


def restricted_relation(name: str) -> bool:
    """Whether a catalogue relation shows statistics (a relayed reference reads no row)."""
    n = name.lower()
    if n in _KEPT_RELATIONS:
        return False
    return n.startswith(("pg_stat_", "pg_statio_")) or n in _RESTRICTED_OTHER_RELATIONS


# Words that make an unparsable statement suspect (it is then refused, not relayed).
_STAT_WORD_FORMS = (
    r"reltuples", r"relpages", r"relallvisible", r"pg_locks", r"n_live_tup", r"n_dead_tup",
    r"pg_stat\w*", r"pg_statio\w*", r"pgstat\w*", r"pg_\w*_size", r"pg_relpages",
    r"pg_visibility\w*", r"pg_freespace\w*", r"pg_buffercache\w*", r"pg_current_wal\w*",
    r"pg_last_wal\w*", r"pg_control_\w+", r"pg_lock_status", r"pg_get_wal\w*", r"get_raw_page",
    r"pgrowlocks",
)  # fmt: skip
_STAT_WORDS = re.compile(r"(?<![a-z0-9_$])(" + "|".join(_STAT_WORD_FORMS) + r")(?![a-z0-9_$])")
#: Every word that ``_STAT_WORDS`` matches, ``pg_class`` and ``uescape`` contain one of these
#: (tests/rewriter/test_statistics.py checks it): a text without any of them names none.
STAT_FRAGMENTS = (
    "pg_", "pgstat", "pgrowlocks", "reltuples", "relpages", "relallvisible", "n_live_tup",
    "n_dead_tup", "get_raw_page", "uescape",
)  # fmt: skip
_HARMLESS_WORDS = frozenset({"pg_stat_activity", "pg_stat_ssl", "pg_stat_gssapi", "pg_size_pretty",
                             "pg_column_size", "pg_size_bytes", "pg_stats", "pg_statistic_ext"})  # fmt: skip

_NAMES: dict[re.Pattern[str], tuple[str, ...]] = {}


@functools.lru_cache(maxsize=64)
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    pattern = re.compile(
        r"(?<![a-z0-9_$])(" + "|".join(re.escape(n) for n in names) + r")(?![a-z0-9_$])"
    )
    _NAMES[pattern] = names
    return pattern


def name_pattern(schema: Schema) -> re.Pattern[str] | None:
    """A regex matching any protected table name as a whole word (lower case)."""
    names = tuple(sorted(schema.tables))
    return _pattern(names) if names else None


_ESCAPES = (
    (re.compile(r"\\\+([0-9a-f]{6})"), 16),
    (re.compile(r"\\u([0-9a-f]{4})"), 16),
    (re.compile(r"\\x([0-9a-f]{1,2})"), 16),
    (re.compile(r"\\([0-9a-f]{4})"), 16),
    (re.compile(r"\\([0-7]{1,3})"), 8),
)


def _decoded(low: str, pat: re.Pattern[str], base: int) -> str | None:
    """``low`` with the escapes ``pat`` matches decoded; None when one does not decode."""
    try:
        return pat.sub(lambda m: chr(int(m.group(1), base)), low).lower()
    except (ValueError, OverflowError):
        return None


#: Joins texts into one string: never in SQL (protocol strings end at NUL) nor in a name, and
#: a word boundary for every pattern here, so nothing matches across two texts.
_SEP = "\x00"


#: The most text (characters) one regex call over joined texts reads: the regex engine keeps
#: the interpreter for the whole call, and other threads (the proxy's event loop) wait that
#: long; 64 Ki characters take a few milliseconds.
_CHUNK = 1 << 16


def _readings(texts: Iterable[str]) -> Iterator[str]:
    """The readings of all ``texts`` (:func:`_variants`), a few at once: the texts are joined
    by ``_SEP`` (up to ``_CHUNK`` characters at a time) and each reading of a join is its
    texts' own readings joined. The same matches as text by text, in a few passes of the
    regex engine instead of several per token (a statement of a million tokens costs about a
    second less)."""
    group: list[str] = []
    size = 0
    for t in texts:
        group.append(t)
        size += len(t) + 1
        if size >= _CHUNK:
            yield from _joined_readings(group)
            group, size = [], 0
    if group:
        yield from _joined_readings(group)


def _variants(text: str) -> list[str]:
    """The text and its readings with PostgreSQL escapes decoded (U&'', E'' strings), lower
    case; a reading whose escapes do not decode is empty."""
    return _joined_readings([text])


def _joined_readings(parts: list[str]) -> list[str]:
    """The readings of ``parts`` joined by ``_SEP``: the join lower-cased, then one per kind
    of escape, in which each part is decoded (empty where its escapes do not decode)."""
    low = _SEP.join(parts).lower()
    if "\\" not in low:
        return [low]
    out = [low]
    for pat, base in _ESCAPES:
        d = _decoded(low, pat, base)
        if d is None:  # a text whose escapes do not decode has no such reading (_variants)
            d = _SEP.join(_decoded(t, pat, base) or "" for t in low.split(_SEP))
        out.append(d)
    return out


def mentions(texts: Iterable[str], pattern: re.Pattern[str] | None) -> set[str]:
    """Protected table names mentioned (case-insensitively, as whole words) in ``texts``,
    also through escapes; ``UESCAPE`` (a custom escape character) counts as mentioning all."""
    if pattern is None:
        return set()
    found: set[str] = set()
    for v in _readings(texts):
        found.update(m.group(1) for m in pattern.finditer(v))
        if "uescape" in v:
            found.update(_NAMES.get(pattern, ()))
    return found


_PG_CLASS = re.compile(r"(?<![a-z0-9_$])pg_class(?![a-z0-9_$])")


def mentions_pg_class(texts: Iterable[str]) -> bool:
    """Whether ``texts`` name pg_class (whose statistics the rewrite may have to hide)."""
    return any(_PG_CLASS.search(v) for v in _readings(texts))


def mentions_statistics(texts: Iterable[str]) -> bool:
    """Whether ``texts`` name a statistics relation, column or function (also through
    escapes, or any escaped identifier: ``U&"..."`` with ``UESCAPE`` hides every name)."""
    for v in _readings(texts):
        if "uescape" in v:
            return True
        for m in _STAT_WORDS.finditer(v):
            if m.group(1) not in _HARMLESS_WORDS:
                return True
    return False


_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_$]*")


def may_name_protected(text: str, schema: Schema) -> bool:
    """False only when no token of ``text`` can name a protected table, a statistic or
    ``pg_class``, by itself or through escapes; True when that is not certain.

    A cheap test of the whole text, without tokenizing it: ASCII text without a backslash
    has no escape to decode and its tokens are pieces of it (quoted ones with doubled quotes
    made single), so a word that none of the lower-cased text's substrings spells is in no
    token. Used to relay big innocent statements without the cost of the tokenizer.
    """
    if not text.isascii() or "\\" in text:
        return True
    names = tuple(schema.tables)
    if not all(_PLAIN_NAME.fullmatch(n) for n in names):
        return True
    low = text.lower()
    return any(w in low for w in names) or any(w in low for w in STAT_FRAGMENTS)


_UNICODE_ESCAPE = re.compile(r"u&[\"']")


def escaped_statistics(text: str) -> bool:
    """Whether a Unicode-escaped name (``U&"pg\\005fclass"``) spells a statistic: sqlglot does
    not read such identifiers, so the statement cannot be guarded."""
    if _UNICODE_ESCAPE.search(text.lower()) is None:
        return False
    decoded = _variants(text)[1:]
    return mentions_statistics(decoded) or mentions_pg_class(decoded)


def _protected_oids(schema: Schema) -> str:
    cond = " OR ".join(
        f"(n.nspname = '{t.schema}' AND c.relname = '{t.name}')" for t in schema.tables.values()
    )
    base = (
        "FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
    )
    return (
        f"SELECT c.oid {base} WHERE {cond} "
        f"UNION ALL SELECT c.reltoastrelid {base} WHERE {cond} "
        f"UNION ALL SELECT i.indexrelid FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c "
        f"ON c.oid = i.indrelid JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace WHERE {cond}"
    )


# -- the rewrite ------------------------------------------------------------------------------


def _span(node: exp.Expr) -> tuple[int, int] | None:
    meta = node.meta if node is not None else None
    if not meta or "start" not in meta:
        return None
    return int(meta["start"]), int(meta["end"]) + 1


def _call_end(tokens: list[Token], name_end: int) -> int | None:
    """The end (exclusive) of the argument list that follows a function name ending at
    ``name_end`` (exclusive)."""
    i = next((k for k, t in enumerate(tokens) if t.end + 1 == name_end), None)
    if i is None or i + 1 >= len(tokens) or tokens[i + 1].token_type is not TokenType.L_PAREN:
        return None
    depth = 0
    for t in tokens[i + 1 :]:
        if t.token_type is TokenType.L_PAREN:
            depth += 1
        elif t.token_type is TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return int(t.end) + 1
    return None


def _table_edit(
    t: exp.Table, text: str, ctes: set[str], system: frozenset[str] = frozenset()
) -> tuple[int, int, str] | None:
    if not isinstance(t.this, exp.Identifier) or not isinstance(t.parent, exp.From | exp.Join):
        return None
    name, db = t.name.lower(), t.db.lower()
    if t.args.get("catalog") is not None or (db == "" and name in ctes):
        return None
    first = _span(t.args["db"]) if t.args.get("db") is not None else _span(t.this)
    last = _span(t.this)
    if first is None or last is None:
        return None
    if name == "pg_class" and db in ("", "pg_catalog"):
        replacement = _pg_class_without_statistics(system)
    elif restricted_relation(name) and db in ("", "pg_catalog", "public"):
        # The relation's own row type, named as the statement names the relation.
        replacement = f"(SELECT (NULL::{text[first[0] : last[1]]}).* WHERE false)"
    else:
        return None
    if not t.alias:
        replacement += f" AS {name}"
    return first[0], last[1], replacement


def _call_edit(fn: exp.Anonymous, text: str, tokens: list[Token]) -> tuple[int, int, str] | None:
    name = _span(fn)
    if name is None:
        return None
    node: exp.Expr = fn
    start = name[0]
    if isinstance(fn.parent, exp.Dot) and fn.parent.expression is fn:
        node = fn.parent
        qual = _span(fn.parent.this)
        if qual is None:
            return None
        start = qual[0]
    end = _call_end(tokens, name[1])
    if end is None:
        return None
    replacement = f"CASE WHEN false THEN {text[start:end]} END"
    if isinstance(node.parent, exp.Select) and node in node.parent.expressions:
        replacement += ' AS "' + fn.name.replace('"', '""') + '"'  # PostgreSQL's column name
    return start, end, replacement


def _reads_pg_class_statistics(tree: exp.Expr, tables: list[exp.Table]) -> bool:
    """Whether a reference to pg_class may read its statistics: a statistics column by name, a
    ``*`` in the SELECT that reads pg_class, or the row as a whole (``c``, ``(c).x``,
    ``row_to_json(c)``). Catalogue queries of tools name their columns and stay as they are."""
    own = [t for t in tables if t.name.lower() == "pg_class"]
    if not own:
        return False
    names = {t.alias_or_name.lower() for t in own}
    for t in own:
        scope = t.find_ancestor(exp.Select)
        if scope is not None and any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
            for e in scope.expressions
        ):
            return True
    for node in tree.walk():
        if isinstance(node, exp.Column):
            name = node.name.lower()
            if name in STAT_COLUMNS or (not node.table and name in names):
                return True
            if isinstance(node.this, exp.Star) and node.table.lower() in names:
                return True
        elif isinstance(node, exp.Identifier) and node.name.lower() in STAT_COLUMNS:
            return True
    return False


def guard_statistics(tree: exp.Expr, text: str, tokens: list[Token] | None = None) -> str | None:
    """``text`` (whose parse is ``tree``; ``tokens`` its tokens when at hand) with every
    statistic hidden (see the module doc); None when there is nothing to hide. Raises
    ValueError when a place to rewrite has no position in the text (the caller refuses)."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = list(tree.find_all(exp.Table))
    if not _reads_pg_class_statistics(tree, tables):
        tables = [t for t in tables if t.name.lower() != "pg_class"]
    system = frozenset(
        n.name.lower() for n in tree.find_all(exp.Column) if n.name.lower() in SYSTEM_COLUMNS
    )
    edits = [e for t in tables if (e := _table_edit(t, text, ctes, system)) is not None]
    calls = [
        f
        for f in tree.find_all(exp.Anonymous)
        if restricted_function(f.name) and not isinstance(f.parent, exp.Table)
    ]
    if calls:
        toks = tokens if tokens is not None else Postgres().tokenize(text)
        for fn in calls:
            e = _call_edit(fn, text, toks)
            if e is None:
                raise ValueError("a statistics function call without a position")
            edits.append(e)
    if not edits:
        return None
    edits.sort()
    out, pos = [], 0
    for start, end, replacement in edits:
        if start < pos:  # inside an edit already made (a call within a call)
            continue
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)


# -- privileges -------------------------------------------------------------------------------

_PRIVILEGE_CALL = re.compile(
    r"\b(?:pg_catalog\s*\.\s*)?(has_table_privilege|has_any_column_privilege)\s*\(", re.I
)


def _call_args(text: str, open_paren: int) -> tuple[list[str], int] | None:
    """Top-level arguments of the call whose '(' is at ``open_paren``, and the index after ')'.

    A small scanner over quotes ('...', "...") and parentheses; None if it is unbalanced.
    """
    args, depth, start, i = [], 0, open_paren + 1, open_paren
    while i < len(text):
        c = text[i]
        if c in "'\"":
            j = text.find(c, i + 1)
            while j != -1 and text[j + 1 : j + 2] == c:  # doubled quote
                j = text.find(c, j + 2)
            if j == -1:
                return None
            i = j
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                return args, i + 1
        elif c == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
        i += 1
    return None


def grant_select_visibility(sql: str, schema: Schema) -> str | None:
    """Report SELECT privilege on protected tables as granted; None when nothing changed.

    BI tools (Metabase's sync) list only tables for which ``has_table_privilege`` /
    ``has_any_column_privilege(..., 'select')`` is true, and the passthrough role has no SELECT
    on protected tables. Through the proxy the analyst *can* select from them (aggregates), so
    such calls answer true for protected relations; every other call is left to PostgreSQL.
    Works on the text (Metabase's query uses reserved words as aliases, which sqlglot does not
    parse); a call it cannot scan is left unchanged, for PostgreSQL to answer. Reveals nothing
    about the data.
    """
    if not schema.tables or not _PRIVILEGE_CALL.search(sql):
        return None
    oids = _protected_oids(schema)
    out, pos, changed = [], 0, False
    for m in _PRIVILEGE_CALL.finditer(sql):
        if m.start() < pos:
            continue
        scanned = _call_args(sql, m.end() - 1)
        if scanned is None:
            continue
        args, end = scanned
        if len(args) not in (2, 3) or args[-1].strip().lower() != "'select'":
            continue
        call = sql[m.start() : end]
        out.append(sql[pos : m.start()])
        out.append(
            f"(CASE WHEN pg_catalog.to_regclass(({args[-2].strip()})::text)::oid IN ({oids}) "
            f"THEN true ELSE {call} END)"
        )
        pos, changed = end, True
    out.append(sql[pos:])
    return "".join(out) if changed else None


# Casts and functions under which a string naming a protected table is harmless: text types
# and arrays of them, privilege checks, string building. Anything else (casts to regclass, size
# functions, query_to_xml, dblink...) holding such a string is refused.
_TEXT_TYPES = frozenset({"text", "varchar", "name", "char", "character varying", "bpchar"})
HARMLESS_FUNCS = frozenset(
    {"has_table_privilege", "has_any_column_privilege", "has_column_privilege", "format",
     "quote_ident", "quote_literal", "concat", "concat_ws", "lower", "upper", "replace",
     "all", "any", "some"}
)  # fmt: skip


def dangerous_literal(node: exp.Expr) -> bool:
    """Whether a string naming a protected table is used as more than a catalogue filter."""
    cur: exp.Expr | None = node.parent
    while cur is not None and not isinstance(cur, exp.Select | exp.Query):
        if isinstance(cur, exp.Cast):
            to = cur.args.get("to")
            tname = to.sql(dialect="postgres").lower() if to is not None else ""
            if tname.removesuffix("[]").strip() not in _TEXT_TYPES:
                return True
        elif isinstance(cur, exp.Anonymous):
            if (cur.name or "").lower() not in HARMLESS_FUNCS:
                return True
        elif isinstance(cur, exp.Func) and not isinstance(
            cur,
            exp.Predicate
            | exp.Connector
            | exp.Collate
            | exp.Concat
            | exp.Lower
            | exp.Upper
            | exp.Not
            | exp.In,
        ):
            return True
        cur = cur.parent
    return False


_ = sqlglot  # the doctest above parses with it
