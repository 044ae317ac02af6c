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

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")


def split_statements(sql: str) -> list[str]:
    out: list[str] = []
    if ";" not in sql:  # only a ';' ends a statement: one (or none), without the scan
        _add(out, sql)
        return out
    start = 0
    i = 0
    n = len(sql)
    depth = 0
    while i < n:
        c = sql[i]
        if c == "'":
            escape = i > 0 and sql[i - 1] in "eE" and (i < 2 or not _ident_char(sql[i - 2]))
            i += 1
            while i < n:
                if escape and sql[i] == "\\":
                    i += 2
                    continue
                if sql[i] == "'":
                    if i + 1 < n and sql[i + 1] == "'":
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == '"':
            i = sql.find('"', i + 1)
            i = n if i < 0 else i + 1
            while i < n and sql[i] == '"':  # "" inside an identifier
                j = sql.find('"', i + 1)
                i = n if j < 0 else j + 1
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and sql.startswith("/*", i):
            level = 1
            i += 2
            while i < n and level:
                if sql.startswith("/*", i):
                    level += 1
                    i += 2
                elif sql.startswith("*/", i):
                    level -= 1
                    i += 2
                else:
                    i += 1
        elif c == "$" and (i == 0 or not _ident_char(sql[i - 1])):
            m = _DOLLAR_TAG.match(sql, i)
            if m:
                end = sql.find(m.group(0), m.end())
                i = n if end < 0 else end + len(m.group(0))
            else:
                i += 1
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth = max(depth - 1, 0)
            i += 1
        elif c == ";" and depth == 0:
            _add(out, sql[start:i])
            i += 1
            start = i
        else:
            i += 1
    _add(out, sql[start:])
    return out


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
