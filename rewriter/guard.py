"""Guard passthrough statements: find protected names and statistics, rewrite or refuse.

A statement that is relayed to the upstream (catalogue, session, unprotected tables) runs
there as a role with no SELECT on protected tables, so PostgreSQL refuses row access itself.
What that role *can* still see are statistics: ``pg_class.reltuples``/``relpages``, the
``pg_stat_*``/``pg_statio_*`` views (``n_live_tup`` ...) and size functions
(``pg_relation_size`` ...). This pass hides them for protected tables (and their indexes and
TOAST tables), rewriting the statement so that tools keep working:

- ``pg_stat_*_tables``/``_indexes`` and ``pg_statio_*`` relations become subqueries without
  the rows of protected relations; ``pg_stats``/``pg_stats_ext*`` likewise (by name);
- ``reltuples``, ``relpages``, ``relallvisible`` of ``pg_class`` read NULL for protected rows;
- size and ``pg_stat_get_*`` functions return NULL for protected relations;
- anything it cannot rewrite safely (``SELECT *`` over ``pg_class``, ``pg_statistic``,
  ``pg_stat_statements``, database-wide tuple counters, other ``pg_stat*`` relations) is
  refused with 42501.

See docs/sql.md, "Statistics catalogue policy".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import sqlglot
from sqlglot import exp

from .errors import RowAccessError
from .schema import Schema

STAT_COLUMNS = frozenset({"reltuples", "relpages", "relallvisible"})
RELID_STATS = frozenset(
    f"pg_{p}_{s}_{k}"
    for p in ("stat", "statio", "stat_xact")
    for s in ("user", "all", "sys")
    for k in ("tables", "indexes", "sequences", "functions")
)
NAME_STATS = frozenset({"pg_stats", "pg_stats_ext", "pg_stats_ext_exprs"})
HARMLESS_STATS = frozenset(
    {"pg_stat_activity", "pg_stat_ssl", "pg_stat_gssapi", "pg_statistic_ext"}
)
SIZE_FUNCS = frozenset(
    {"pg_relation_size", "pg_table_size", "pg_total_relation_size", "pg_indexes_size", "pg_relpages",
     "pg_visibility_map_summary", "pg_freespace", "pg_visibility", "pg_visibility_map", "pgstattuple",
     "pgstattuple_approx", "pgstatindex", "pgstatginindex", "pgstathashindex", "pg_relation_filepath"}
)  # fmt: skip
# Functions under which a string naming a protected table is harmless (privilege checks,
# string building). Anything else (casts to regclass, size functions, query_to_xml, dblink...)
# holding such a string is refused.
HARMLESS_FUNCS = frozenset(
    {"has_table_privilege", "has_any_column_privilege", "has_column_privilege", "format",
     "quote_ident", "quote_literal", "concat", "concat_ws", "lower", "upper", "replace"}
)  # fmt: skip
_STAT_WORDS = re.compile(
    r"(?<![a-z0-9_$])(reltuples|relpages|relallvisible|n_live_tup|n_dead_tup|pg_stat\w*|pg_statio\w*"
    r"|pg_statistic\w*|pg_\w*_size|pgstat\w*|pg_relpages|pg_visibility\w*|pg_freespace\w*)(?![a-z0-9_$])"
)


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


def _variants(text: str) -> list[str]:
    """The text and its readings with PostgreSQL escapes decoded (U&'', E'' strings)."""
    low = text.lower()
    if "\\" not in low:
        return [low]
    out = [low]
    for pat, base in _ESCAPES:
        try:
            out.append(pat.sub(lambda m, b=base: chr(int(m.group(1), b)), low).lower())  # type: ignore[misc]
        except (ValueError, OverflowError):
            continue
    return out


def mentions(texts: Iterable[str], pattern: re.Pattern[str] | None) -> set[str]:
    """Protected table names mentioned (case-insensitively, as whole words) in ``texts``,
    also through escapes; ``UESCAPE`` (a custom escape character) counts as mentioning all."""
    if pattern is None:
        return set()
    found: set[str] = set()
    for t in texts:
        for v in _variants(t):
            found.update(m.group(1) for m in pattern.finditer(v))
            if "uescape" in v:
                found.update(_NAMES.get(pattern, ()))
    return found


def mentions_statistics(texts: Iterable[str]) -> bool:
    for t in texts:
        for m in _STAT_WORDS.finditer(t.lower()):
            if m.group(1) not in HARMLESS_STATS:
                return True
    return False


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


def _refuse(what: str) -> RowAccessError:
    return RowAccessError(
        f"{what} may reveal statistics of protected tables and is not relayed",
        hint="statistics of protected tables are hidden; query pg_class/pg_stat_* without them, "
        "or ask for a differentially private COUNT(*)",
    )


def _enclosing_pg_class(col: exp.Column) -> str | None:
    """Alias (or name) of the single pg_class in the SELECT scope that holds ``col``."""
    sel = col.find_ancestor(exp.Select)
    if sel is None:
        return None
    names = []
    for t in sel.find_all(exp.Table):
        if t.find_ancestor(exp.Select) is sel and t.name.lower() == "pg_class":
            names.append(t.alias_or_name)
    return names[0] if len(names) == 1 else None


def _reads_statistics(tree: exp.Expr) -> bool:
    for node in tree.walk():
        if isinstance(node, exp.Table):
            name = node.name.lower()
            if name == "pg_class" or (name.startswith("pg_stat") and name not in HARMLESS_STATS):
                return True
        elif isinstance(node, exp.Column) and node.name.lower() in STAT_COLUMNS:
            return True
        elif isinstance(node, exp.Anonymous):
            fname = (node.name or "").lower()
            if fname in SIZE_FUNCS or fname.startswith("pg_stat"):
                return True
    return False


def guard_statistics(tree: exp.Expr, schema: Schema) -> exp.Expr | None:
    """Rewrite ``tree`` to hide statistics of protected tables; None when nothing to hide.

    Raises :class:`RowAccessError` when the statement reads statistics it cannot rewrite.
    """
    if not schema.tables:
        return None
    if not _reads_statistics(tree):
        return None
    changed = False
    oids = _protected_oids(schema)
    tree = tree.copy()
    for t in list(tree.find_all(exp.Table)):
        name = t.name.lower()
        if name in HARMLESS_STATS or not (name.startswith("pg_stat") or name == "pg_statistic"):
            continue
        alias = t.alias_or_name
        if name in RELID_STATS:
            cond = f"relid NOT IN ({oids})"
        elif name in NAME_STATS:
            cond = " AND ".join(
                f"NOT (schemaname = '{d.schema}' AND tablename = '{d.name}')"
                for d in schema.tables.values()
            )
        else:
            raise _refuse(f"reading {name}")
        sub = sqlglot.parse_one(
            f"(SELECT * FROM pg_catalog.{name} WHERE {cond}) AS {alias}", read="postgres"
        )
        t.replace(sub)
        changed = True
    for col in list(tree.find_all(exp.Column)):
        if isinstance(col.this, exp.Star):
            if col.table and any(
                t.alias_or_name == col.table and t.name.lower() == "pg_class"
                for t in tree.find_all(exp.Table)
            ):
                raise _refuse("SELECT * over pg_class")
            continue
        if col.name.lower() not in STAT_COLUMNS:
            continue
        qual = col.table or _enclosing_pg_class(col)
        if not qual:
            raise _refuse(f"reading {col.name.lower()}")
        masked = sqlglot.parse_one(
            f"CASE WHEN {qual}.oid IN ({oids}) THEN NULL ELSE {col.sql(dialect='postgres')} END",
            read="postgres",
        )
        col.replace(masked)
        changed = True
    for sel in tree.find_all(exp.Select):
        if any(isinstance(e, exp.Star) for e in sel.expressions) and any(
            t.name.lower() == "pg_class" and t.find_ancestor(exp.Select) is sel
            for t in sel.find_all(exp.Table)
        ):
            raise _refuse("SELECT * over pg_class")
    for fn in list(tree.find_all(exp.Func)):
        fname = (fn.name or "").lower() if isinstance(fn, exp.Anonymous) else ""
        if not fname:
            continue
        if fname.startswith("pg_stat_get_db_") or fname == "pg_stat_statements":
            raise _refuse(f"calling {fname}")
        if fname in SIZE_FUNCS or fname.startswith("pg_stat_get_"):
            if not fn.expressions:
                raise _refuse(f"calling {fname}")
            arg = fn.expressions[0].sql(dialect="postgres")
            # pg_catalog.f(...) parses as Dot(pg_catalog, f(...)): replace the whole call
            target: exp.Expr = fn
            if isinstance(fn.parent, exp.Dot) and fn.parent.expression is fn:
                target = fn.parent
            masked = sqlglot.parse_one(
                f"CASE WHEN ({arg})::regclass::oid IN ({oids}) THEN NULL ELSE {target.sql(dialect='postgres')} END",
                read="postgres",
            )
            target.replace(masked)
            changed = True
    return tree if changed else None


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


def dangerous_literal(node: exp.Expr) -> bool:
    """Whether a string naming a protected table is used as more than a catalogue filter."""
    cur: exp.Expr | None = node.parent
    while cur is not None and not isinstance(cur, exp.Select | exp.Query):
        if isinstance(cur, exp.Cast):
            to = cur.args.get("to")
            tname = to.sql(dialect="postgres").lower() if to is not None else ""
            if tname not in ("text", "varchar", "name", "char"):
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
