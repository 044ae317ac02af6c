"""The statement splitter, the idle-connection Describe helper and the router's parts."""

from __future__ import annotations

import pytest
from conftest import TestRouter

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
