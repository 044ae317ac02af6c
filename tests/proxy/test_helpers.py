"""The statement splitter, the idle-connection Describe helper and the router's parts."""

from __future__ import annotations

import re

import pytest
from conftest import TestRouter
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.wire.router import (
    RELAY,
    AnswerLocally,
    Refuse,
    SessionInfo,
    StatementInfo,
    resolve_formats,
)
from proxy.wire.sqlsplit import split_statements
from proxy.wire.upstream import DescribeError, UpstreamConfig, UpstreamConnection, describe_idle


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
        ("", []),
        (" ; ;", []),
        ("-- only a comment", []),
        ("/* only */ -- comments\n", []),
        ("-- a comment;\n", []),
        ("SELECT 1 -- and a comment", ["SELECT 1 -- and a comment"]),
        ("  SELECT 8 / 2 - 1\n", ["SELECT 8 / 2 - 1"]),
        ("SELECT ';'; SELECT 2", ["SELECT ';'", "SELECT 2"]),
        ("SELECT 'it''s; fine'", ["SELECT 'it''s; fine'"]),
        ("SELECT E'a\\';b'; SELECT 2", ["SELECT E'a\\';b'", "SELECT 2"]),
        ('SELECT 1 AS "a;b"; SELECT 2', ['SELECT 1 AS "a;b"', "SELECT 2"]),
        ("DO $$BEGIN PERFORM 1; END$$; SELECT 2", ["DO $$BEGIN PERFORM 1; END$$", "SELECT 2"]),
        ("SELECT $tag$;$tag$; SELECT 2", ["SELECT $tag$;$tag$", "SELECT 2"]),
        (
            "SELECT 1 /* ; /* nested; */ ; */; SELECT 2",
            ["SELECT 1 /* ; /* nested; */ ; */", "SELECT 2"],
        ),
        ("SELECT 1 -- x;\n; SELECT 2", ["SELECT 1 -- x;", "SELECT 2"]),
        (
            "CREATE RULE r AS ON INSERT TO t DO (SELECT 1; SELECT 2)",
            ["CREATE RULE r AS ON INSERT TO t DO (SELECT 1; SELECT 2)"],
        ),
        ("SELECT $1; SELECT 2", ["SELECT $1", "SELECT 2"]),
    ],
)
def test_split_statements(sql: str, want: list[str]) -> None:
    assert split_statements(sql) == want


def _reference_split(sql: str) -> list[str]:
    """The splitter as it was written first, a character at a time: the oracle for the regex
    scan that replaced it (a megabyte took 0.2 s on the event loop)."""
    out: list[str] = []
    start = i = depth = 0
    n = len(sql)

    def ident(c: str) -> bool:
        return c.isalnum() or c == "_"

    while i < n:
        c = sql[i]
        if c == "'":
            escape = i > 0 and sql[i - 1] in "eE" and (i < 2 or not ident(sql[i - 2]))
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
            while i < n and sql[i] == '"':
                j = sql.find('"', i + 1)
                i = n if j < 0 else j + 1
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and sql.startswith("/*", i):
            level, i = 1, i + 2
            while i < n and level:
                if sql.startswith("/*", i):
                    level, i = level + 1, i + 2
                elif sql.startswith("*/", i):
                    level, i = level - 1, i + 2
                else:
                    i += 1
        elif c == "$" and (i == 0 or not ident(sql[i - 1])):
            m = re.match(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$", sql[i:])
            if m:
                end = sql.find(m.group(0), i + m.end())
                i = n if end < 0 else end + len(m.group(0))
            else:
                i += 1
        elif c == "(":
            depth, i = depth + 1, i + 1
        elif c == ")":
            depth, i = max(depth - 1, 0), i + 1
        elif c == ";" and depth == 0:
            out.append(sql[start:i])
            i += 1
            start = i
        else:
            i += 1
    out.append(sql[start:])
    kept = []
    for stmt in out:
        bare = re.sub(r"/\*.*?\*/", " ", re.sub(r"--[^\n]*", " ", stmt), flags=re.S)
        if bare.strip():
            kept.append(stmt.strip())
    return kept


_SQL_BITS = ["'", '"', "''", '""', "E'", "e'", "xE'", "\\", "\\'", "$", "$$", "$a$", "a$",
             "$1", "--", "\n", "/*", "*/", "/", "-", "*", "(", ")", ";", " ", "x", "é", "1"]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_SQL_BITS), max_size=30))
def test_the_regex_scan_splits_as_the_reference(bits: list[str]) -> None:
    sql = "".join(bits)
    assert split_statements(sql) == _reference_split(sql)


async def test_describe_idle_as_role_without_select(pg) -> None:  # type: ignore[no-untyped-def]
    cfg = UpstreamConfig.from_dsn(pg.passthrough_dsn)
    conn = await UpstreamConnection.connect(cfg)
    try:
        d = await describe_idle(conn, "SELECT count(*), avg(age) FROM adult WHERE age > $1")
        assert d.param_oids == (23,)
        assert d.fields is not None
        assert [(f.name, f.type_oid) for f in d.fields] == [("count", 20), ("avg", 1700)]
        d = await describe_idle(conn, "SET search_path = public")
        assert d.fields is None
        with pytest.raises(DescribeError) as ei:
            await describe_idle(conn, "SELECT * FROM nosuch")
        assert ei.value.error.sqlstate == "42P01"
        d = await describe_idle(conn, "SELECT 1")  # the connection is still usable
        assert d.fields is not None
    finally:
        await conn.close()


def _info(sql: str) -> StatementInfo:
    s = SessionInfo(user="u", database="d", application_name="", session_pid=1, txn_status="I")
    return StatementInfo(sql=sql, protocol="simple", session=s)


async def test_protected_tables_router() -> None:
    r = TestRouter({"adult"})
    assert r.route(_info("SELECT relname FROM pg_class")) == RELAY
    assert r.route(_info("not sql at all (")) == RELAY  # the backend reports it
    for sql in (
        "SELECT * FROM adult",
        "SELECT * FROM public.adult",
        "WITH x AS (SELECT age FROM adult) SELECT * FROM x",
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM adult)",
        "COPY adult TO STDOUT",
        "TABLE adult",
    ):
        got = r.route(_info(sql))
        assert isinstance(got, Refuse), sql
        assert got.error.sqlstate == "42501"
    for probe in (
        "SELECT * FROM adult LIMIT 0",
        "SELECT * FROM adult WHERE 1 = 0",
        'SELECT TRUE AS "_" FROM "public"."adult" WHERE 1 <> 1 LIMIT 0',
        "SELECT * FROM adult WHERE false",
    ):
        assert isinstance(r.route(_info(probe)), AnswerLocally), probe


def test_resolve_formats() -> None:
    assert resolve_formats((), 3) == (0, 0, 0)
    assert resolve_formats((1,), 2) == (1, 1)
    assert resolve_formats((0, 1), 2) == (0, 1)
    assert resolve_formats((0, 1), 3) is None
