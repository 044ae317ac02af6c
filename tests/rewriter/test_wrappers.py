"""rewriter.wrappers: reading the wrappers tools put around a statement, and the commands that
address what they made, with PostgreSQL's lexical rules; and the classifier's use of them."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import rewriter
from rewriter import wrappers
from rewriter.wrappers import (
    CloseCursor,
    CopyTo,
    Deallocate,
    DeclareCursor,
    ExecutePrepared,
    Fetch,
    NamesCursor,
    NamesStatement,
    PrepareAs,
)

ADULT = rewriter.load_schema(__file__.rsplit("/tests/", 1)[0] + "/sql_fixtures/adult/lapras.toml")
INNER = "SELECT count(*) FROM adult"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"EXPLAIN {INNER}", "explain"),
        (f"explain analyze verbose {INNER}", "explain"),
        (f"EXPLAIN (FORMAT JSON, COSTS off) {INNER}", "explain"),
        (f"DECLARE c CURSOR FOR {INNER}", "declare"),
        (
            f'declare "a ""b""" binary insensitive no scroll cursor without hold for {INNER}',
            "declare",
        ),
        (f"DECLARE /* a comment */ c -- and another\n CURSOR WITH HOLD FOR {INNER}", "declare"),
        (f"PREPARE p AS {INNER}", "prepare"),
        (f"PREPARE p (int, character varying(10), numeric(5, 2)) AS {INNER}", "prepare"),
        (f"COPY ({INNER}) TO STDOUT", "copy"),
        (f"copy(  {INNER}  )to stdout with csv header", "copy"),
        (f"COPY (/* ) */ {INNER} /* ( */) TO STDOUT (FORMAT 'text')", "copy"),
    ],
)
def test_locate_finds_the_carried_statement(text: str, kind: str) -> None:
    located = wrappers.locate(text)
    assert located is not None and located.kind == kind
    inner = text[located.start : located.end]
    assert inner.strip() == INNER or inner.startswith("/*") or inner.endswith("*/")
    assert INNER in inner


@pytest.mark.parametrize(
    "text",
    [
        INNER,
        "PREPARE TRANSACTION 'adult'",
        "COPY adult TO STDOUT",
        "COPY (SELECT 1 TO STDOUT",
        f"DECLARE c CURSOR {INNER}",
        f"DECLARE c SCROLL NO CURSOR FOR {INNER}",
        "EXPLAIN",
        'DECLARE "" CURSOR FOR SELECT 1',
        "DECLARE c CURSOR FOR 'unterminated",
    ],
)
def test_locate_leaves_what_is_not_a_wrapper(text: str) -> None:
    assert wrappers.locate(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FETCH c", Fetch("c", "forward", 1, False)),
        ("fetch from c", Fetch("c", "forward", 1, False)),
        ('FETCH NEXT IN "C"', Fetch("C", "forward", 1, False)),
        ("FETCH PRIOR FROM c", Fetch("c", "backward", 1, False)),
        ("FETCH FIRST c", Fetch("c", "absolute", 1, False)),
        ("FETCH LAST c", Fetch("c", "absolute", -1, False)),
        ("FETCH ABSOLUTE -3 FROM c", Fetch("c", "absolute", -3, False)),
        ("FETCH RELATIVE +2 IN c", Fetch("c", "relative", 2, False)),
        ("FETCH 100 IN Sql_Cur", Fetch("sql_cur", "forward", 100, False)),
        ("FETCH -5 c", Fetch("c", "forward", -5, False)),
        ("FETCH ALL FROM c", Fetch("c", "forward", None, False)),
        ("FETCH FORWARD c", Fetch("c", "forward", 1, False)),
        ("FETCH FORWARD 7 FROM c", Fetch("c", "forward", 7, False)),
        ("FETCH FORWARD ALL c", Fetch("c", "forward", None, False)),
        ("FETCH BACKWARD c", Fetch("c", "backward", 1, False)),
        ("FETCH BACKWARD 0 c", Fetch("c", "backward", 0, False)),
        ("FETCH BACKWARD ALL IN c", Fetch("c", "backward", None, False)),
        ("MOVE LAST IN c", Fetch("c", "absolute", -1, True)),
        ("/* psycopg */ MOVE ABSOLUTE 2 FROM c;", Fetch("c", "absolute", 2, True)),
        ("FETCH next", Fetch("next", "forward", 1, False)),
        ("CLOSE c", CloseCursor("c")),
        ('close "SQL_CUR0x55d0"', CloseCursor("SQL_CUR0x55d0")),
        ("CLOSE ALL", CloseCursor(None)),
        ("DEALLOCATE p", Deallocate("p")),
        ("DEALLOCATE PREPARE dbdpg_p123_1", Deallocate("dbdpg_p123_1")),
        ("deallocate prepare all", Deallocate(None)),
        ("EXECUTE p", ExecutePrepared("p", ())),
        (
            "EXECUTE p (30, -4, 1.5, 'it''s', E'a\\tb', NULL, true, '7'::int)",
            ExecutePrepared("p", ("30", "-4", "1.5", "it's", "a\tb", None, "true", "7")),
        ),
        ("EXECUTE p(1 + 1)", ExecutePrepared("p", None)),
        (f"DECLARE x SCROLL CURSOR FOR {INNER}", NamesCursor("x")),
        ("PREPARE y (int) AS SELECT $1", NamesStatement("y")),
    ],
)
def test_command_reads_what_postgres_reads(text: str, expected: object) -> None:
    assert wrappers.command(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",
        "FETCH",
        "FETCH ABSOLUTE c",
        "FETCH 1.5 c",
        "FETCH 99999999999 c",
        "CLOSE a, b",
        "DEALLOCATE",
        "EXECUTE p()",
        "EXECUTE",
        "PREPARE TRANSACTION 'x'",
    ],
)
def test_command_leaves_what_does_not_parse_to_the_backend(text: str) -> None:
    assert wrappers.command(text) is None


NAMES = [
    "plain",
    "MiXeD",
    '"MiXeD"',
    '"with ""quotes"" and spaces"',
    'U&"d\\0061t\\+000061"',
    "é_ünïcode",
    "x" * 70,
    '"' + "é" * 40 + '"',
]


@pytest.mark.parametrize("spelling", NAMES)
def test_names_read_as_postgres_reads_them(pg: Any, spelling: str) -> None:
    """The cursor name PostgreSQL registers (pg_cursors) for each spelling, and ours: case
    folding, quotes, Unicode escapes, the cut at 63 bytes."""
    with psycopg.connect(pg.admin_dsn) as conn:
        conn.execute(f"DECLARE {spelling} CURSOR FOR SELECT 1")
        (theirs,) = conn.execute("SELECT name FROM pg_cursors").fetchone() or ("",)
        conn.rollback()
    located = wrappers.locate(f"DECLARE {spelling} CURSOR FOR SELECT count(*) FROM adult")
    assert located is not None
    ours = wrappers.describe(located, "", ["count"])
    assert isinstance(ours, DeclareCursor) and ours.name == theirs
    assert wrappers.command(f"FETCH 1 FROM {spelling}") == Fetch(theirs, "forward", 1, False)


def test_classify_gives_the_wrapper_of_a_dp_statement() -> None:
    def one(sql: str) -> rewriter.Statement:
        [st] = rewriter.classify(sql, ADULT)
        return st

    st = one(f"COPY ({INNER}) TO STDOUT WITH (FORMAT csv, HEADER, FORCE_QUOTE *)")
    assert isinstance(st, rewriter.DPStatement)
    assert st.wrapper == CopyTo(
        format="csv", header=True, delimiter=",", null="", force_quote=(True,)
    )
    plain = one(INNER)
    assert isinstance(plain, rewriter.DPStatement) and plain.wrapper is None
    assert st.plan is not None and plain.plan is not None
    assert st.plan.batch.key == plain.plan.batch.key  # the same question: the same answer
    st = one(f"DECLARE c BINARY SCROLL CURSOR WITH HOLD FOR {INNER}")
    assert isinstance(st, rewriter.DPStatement)
    assert st.wrapper == DeclareCursor(name="c", binary=True, scroll=True, hold=True)
    st = one("PREPARE p (int4) AS SELECT count(*) FROM adult WHERE age > $1")
    assert isinstance(st, rewriter.DPStatement) and st.param_types == (23,)
    assert st.wrapper == PrepareAs(name="p", param_types=("int4",))


@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [
        (f"EXPLAIN {INNER}", "42501"),
        (f"COPY ({INNER}) TO '/tmp/x'", "42501"),
        (f"COPY ({INNER}) TO PROGRAM 'cat'", "42501"),
        (f"COPY ({INNER}) FROM STDIN", "42601"),
        (f"COPY ({INNER}) TO STDOUT (FORMAT binary, HEADER)", "0A000"),
        (f"COPY ({INNER}) TO STDOUT (ENCODING 'LATIN1')", "0A000"),
        ("COPY (SELECT * FROM adult) TO STDOUT", "42501"),
        (f"DECLARE c SCROLL NO SCROLL CURSOR FOR {INNER}", "42P11"),
        (f"DECLARE c ASENSITIVE INSENSITIVE CURSOR FOR {INNER}", "42P11"),
        ("DECLARE c CURSOR FOR SELECT age FROM adult", "42501"),
        ("PREPARE p AS SELECT * FROM adult", "42501"),
    ],
)
def test_classify_refuses_as_postgres_or_the_proxy_must(sql: str, sqlstate: str) -> None:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.Refused), st
    assert st.error.sqlstate == sqlstate, st.error


def test_wrappers_of_relayed_statements_are_kept_as_written() -> None:
    for sql in (
        "COPY (SELECT 1) TO STDOUT",
        "DECLARE c CURSOR FOR SELECT 1",
        "PREPARE p AS SELECT relname FROM pg_class",
    ):
        assert rewriter.classify(sql, ADULT) == [rewriter.Passthrough(sql=sql)]
    sql = "COPY (SELECT relname, reltuples FROM pg_class WHERE relname = 'adult') TO STDOUT CSV"
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.Passthrough) and st.rewritten
    assert st.sql.startswith("COPY (SELECT relname, reltuples FROM (SELECT oid")
    assert st.sql.endswith(") AS pg_class WHERE relname = 'adult') TO STDOUT CSV")
