"""Split a simple-Query string into its statements, PostgreSQL's lexer rules in small.

A simple Query may hold several statements separated by ``;`` (protocol-flow "Multiple
Statements in a Simple Query"); each is routed on its own. The splitter knows the tokens in
which a ``;`` does not end a statement: '...' and E'...' strings, "..." identifiers,
$tag$...$tag$ bodies, -- and nested /* */ comments, and parentheses (``CREATE RULE ... DO
(a; b)``). Empty statements are dropped.

>>> split_statements("SELECT 1; SELECT ';' ; -- x;\\n")
['SELECT 1', "SELECT ';'"]
"""

from __future__ import annotations

import re

#: A statement that begins, ends or divides a transaction block.
TXN_CONTROL = re.compile(
    r"^\s*(BEGIN|START|COMMIT|END|ROLLBACK|ABORT|SAVEPOINT|RELEASE|PREPARE\s+TRANSACTION)\b",
    re.I,
)
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
# The next place where a ';' might end a statement or a token in which it does not begins:
# one of '"();$, or -- or /*. Written as a character class first, which the regex engine
# scans for fast (an alternation of the same is ten times slower).
_NEXT = re.compile(r"""[-'"();/$](?:(?<=-)-|(?<=/)\*|(?<=[^-/]))""")
# The rest of a string after its opening quote, up to (not with) the closing one; '' stays
# inside. In an E'' string a backslash takes the character after it.
_STRING_REST = re.compile(r"[^']*(?:''[^']*)*")
_ESCAPE_STRING_REST = re.compile(r"[^'\\]*(?:(?:''|\\.)[^'\\]*)*", re.S)
_IDENTIFIER = re.compile(r'"[^"]*(?:""[^"]*)*"?')
_LINE_COMMENT = re.compile(r"--[^\n]*\n?")
_BLOCK_COMMENT_MARK = re.compile(r"/\*|\*/")


def split_statements(sql: str) -> list[str]:
    out: list[str] = []
    if ";" not in sql:  # only a ';' ends a statement: one (or none), without the scan
        _add(out, sql)
        return out
    # A regex scan: the engine skips what cannot matter, Python looks only at the places
    # _NEXT finds (this runs on the event loop; a megabyte takes a few milliseconds).
    start = 0
    i = 0
    n = len(sql)
    depth = 0
    while True:
        m = _NEXT.search(sql, i)
        if m is None:
            break
        i = m.start()
        c = sql[i]
        if c == "'":
            escape = i > 0 and sql[i - 1] in "eE" and (i < 2 or not _ident_char(sql[i - 2]))
            # past the closing quote (or the end: unterminated)
            i = _end(_ESCAPE_STRING_REST if escape else _STRING_REST, sql, i + 1) + 1
        elif c == '"':
            i = _end(_IDENTIFIER, sql, i)
        elif c == "-":
            i = _end(_LINE_COMMENT, sql, i)
        elif c == "/":
            i = _block_comment_end(sql, i + 2)
        elif c == "$":
            # after a letter, digit or '_' a '$' is part of a name or a parameter, not a tag
            tag = _DOLLAR_TAG.match(sql, i) if i == 0 or not _ident_char(sql[i - 1]) else None
            if tag:
                close = sql.find(tag.group(0), tag.end())
                i = n if close < 0 else close + len(tag.group(0))
            else:
                i += 1
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth = max(depth - 1, 0)
            i += 1
        else:  # ';'
            if depth == 0:
                _add(out, sql[start:i])
                start = i + 1
            i += 1
    _add(out, sql[start:])
    return out


def _end(pattern: re.Pattern[str], sql: str, i: int) -> int:
    m = pattern.match(sql, i)
    assert m is not None  # each matches where _NEXT found its first character
    return m.end()


def _block_comment_end(sql: str, i: int) -> int:
    """The end of a /* comment whose body starts at ``i`` (comments nest); len(sql) when it
    is not closed."""
    level = 1
    for m in _BLOCK_COMMENT_MARK.finditer(sql, i):
        level += 1 if m.group(0) == "/*" else -1
        if level == 0:
            return m.end()
    return len(sql)


def _ident_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _add(out: list[str], stmt: str) -> None:
    stripped = stmt.strip()
    if "-" not in stmt and "/" not in stmt:  # no comment to look past
        if stripped:
            out.append(stripped)
    elif _strip_comments(stmt).strip():
        out.append(stripped)


def _strip_comments(stmt: str) -> str:
    s = re.sub(r"--[^\n]*", " ", stmt)
    return re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
