"""DP statements in the wrappers tools put around them, through the whole proxy.

``COPY (<DP statement>) TO STDOUT`` (text, CSV, binary; psql ``\\copy``; connectorx and
ADBC), ``DECLARE ... CURSOR FOR <DP statement>`` with FETCH/MOVE/CLOSE (psycopg and
SQLAlchemy server-side cursors, psqlODBC's UseDeclareFetch), SQL ``PREPARE``/``EXECUTE``/
``DEALLOCATE``, and DBD::Pg's ``DEALLOCATE`` of a statement it prepared with the protocol.

The oracle is PostgreSQL itself: every answer is compared with what the backend sends for the
same rows (a VALUES list of the proxy's own plain answer, whose repeat costs nothing), byte for
byte for COPY, row by row and tag by tag for cursors, SQLSTATE by SQLSTATE for errors.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from epoch_helpers import ANALYST, DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch
from psycopg import pq

from proxy import provision
from proxy.config import parse_config
from proxy.wire.answering import LocalAnswering
from proxy.wire.copyout import copy_data
from rewriter import wrappers

BY_SEX = "SELECT sex, count(*) FROM adult GROUP BY sex"  # predicted: no budget
FOUR = "SELECT sex, income, count(*) FROM adult GROUP BY sex, income ORDER BY sex, income"
MIXED = "SELECT income, count(*), sum(age), avg(age) FROM adult GROUP BY income"
OVER = "SELECT count(*) FROM adult WHERE age > {}"
PG_TYPES = {
    16: "bool",
    20: "int8",
    21: "int2",
    23: "int4",
    25: "text",
    701: "float8",
    1700: "numeric",
}


@pytest.fixture(scope="module")
def proxy(pg: Any) -> Iterator[Proxy]:
    reset_ledger(pg)
    config = parse_config(config_text(pg), "wrappers.toml")
    start_epoch(config, DASHBOARD)
    with Proxy(config, seed=11) as p:
        yield p


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The wrappers the proxy's sessions answered (the real sessions, observed)."""
    out: list[object] = []
    original = LocalAnswering._wrapped_answer

    async def spy(self: LocalAnswering, execution: Any, *, extended: bool) -> Any:
        out.append(execution.route.wrapper)
        return await original(self, execution, extended=extended)

    monkeypatch.setattr(LocalAnswering, "_wrapped_answer", spy)
    return out


@pytest.fixture
def backend(pg: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        yield conn


def _literal(value: object, oid: int) -> str:
    t = PG_TYPES[oid]
    if value is None:
        return f"NULL::{t}"
    return "'" + str(value).replace("'", "''") + f"'::{t}"


def values_sql(names: list[str], oids: list[int], rows: list[tuple[Any, ...]]) -> str:
    """The rows as a VALUES list PostgreSQL types exactly as ``oids``, columns ``names``."""
    body = ", ".join(
        "(" + ", ".join(_literal(v, o) for v, o in zip(r, oids, strict=True)) + ")" for r in rows
    )
    cols = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
    return f"SELECT * FROM (VALUES {body}) AS v({cols})"


def answer(conn: psycopg.Connection[Any], sql: str) -> tuple[str, list[tuple[Any, ...]]]:
    """The proxy's plain answer to ``sql`` and the same rows as a VALUES list."""
    cur = conn.execute(sql)
    rows = cur.fetchall()
    assert cur.description is not None
    names = [d.name for d in cur.description]
    oids = [d.type_code for d in cur.description]
    return values_sql(names, oids, rows), rows


def copied(conn: psycopg.Connection[Any], sql: str) -> tuple[list[bytes], int]:
    cur = conn.cursor()
    with cur.copy(sql) as cp:
        chunks = [bytes(c) for c in cp]
    return chunks, cur.rowcount


def outcome(conn: psycopg.Connection[Any], sql: str) -> tuple[object, ...]:
    """What PostgreSQL's answer to one simple Query looks like to a client: status, tag,
    formats, rows as sent; or the SQLSTATE; and the transaction status after it."""
    r = conn.pgconn.exec_(sql.encode())
    status = pq.ExecStatus(r.status)
    after = pq.TransactionStatus(conn.pgconn.transaction_status).name
    if status == pq.ExecStatus.FATAL_ERROR:
        return ("error", r.error_field(pq.DiagnosticField.SQLSTATE), after)
    rows = [tuple(r.get_value(i, j) for j in range(r.nfields)) for i in range(r.ntuples)]
    formats = tuple(r.fformat(j) for j in range(r.nfields))
    return (status.name, r.command_status, formats, rows, after)


def describe_portal(conn: psycopg.Connection[Any], name: bytes) -> pq.abc.PGresult:
    """The protocol's Describe of a portal, as psycopg sends it after a DECLARE (without
    blocking the interpreter, which the in-process proxy needs)."""
    pgc = conn.pgconn
    pgc.send_describe_portal(name)
    results = []
    while True:
        pgc.consume_input()
        if pgc.is_busy():
            time.sleep(0.002)
            continue
        r = pgc.get_result()
        if r is None:
            return results[0]
        results.append(r)


def _drain(conn: psycopg.Connection[Any]) -> None:
    if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        conn.pgconn.exec_(b"ROLLBACK")


# ---------------------------------------------------------------------------- COPY encoder

ENCODER_ROWS: list[tuple[Any, ...]] = [
    ("a\tb\\c\nd", 1, None, Decimal("2.50"), True, 1.5, 7),
    ("", -5, Decimal("-0.001"), Decimal("NaN"), False, 1e20, None),
    ("\\.", None, Decimal("123456789.0123"), None, None, -0.25, -32768),
    ("q\"u'o,|;", 9223372036854775807, Decimal(0), Decimal("1E+3"), True, None, 32767),
    ("\x01\x0b\r\x08\x0c é€", 0, Decimal("1.000"), Decimal("0.5"), False, 2.0, 0),
    ("NULL", 42, None, Decimal(7), None, 0.1, 1),
]
ENCODER_NAMES = ["x,y", "n", 'a"b', "k", "flag", "f", "s"]
ENCODER_OIDS = [25, 20, 1700, 1700, 16, 701, 21]
COPY_OPTIONS = [
    "",
    "(FORMAT text, HEADER)",
    "(DELIMITER ',')",
    "(DELIMITER '|', NULL 'NULL', HEADER true)",
    "WITH DELIMITER AS ';' NULL AS ''",
    "(FORMAT csv)",
    "(FORMAT csv, HEADER)",
    "CSV HEADER",
    "WITH CSV HEADER DELIMITER ';' NULL 'x' FORCE QUOTE *",
    "(FORMAT csv, QUOTE '''', ESCAPE '\\')",
    '(FORMAT "csv", FORCE_QUOTE ("x,y", n), HEADER on)',
    "(FORMAT csv, NULL 'NULL')",
    "(FORMAT csv, DELIMITER E'\\t', QUOTE '|', ESCAPE '~')",
    "(FREEZE, ENCODING 'utf8', FORMAT csv)",
    "(FORMAT binary)",
    "WITH BINARY",
    "BINARY",
]


def _spec(options: str, names: list[str]) -> wrappers.CopyTo:
    text = f"COPY (SELECT 1) TO STDOUT {options}"
    located = wrappers.locate(text)
    assert located is not None
    spec = wrappers.describe(located, text, names)
    assert isinstance(spec, wrappers.CopyTo)
    return spec


@pytest.mark.parametrize("options", COPY_OPTIONS)
def test_copy_encoder_is_postgres_byte_for_byte(
    backend: psycopg.Connection[Any], options: str
) -> None:
    """The proxy's COPY encoder and PostgreSQL's COPY TO STDOUT of the same values: the
    same CopyData messages, to the byte (escapes, quoting, NULL, header, binary layout)."""
    sql = values_sql(ENCODER_NAMES, ENCODER_OIDS, ENCODER_ROWS)
    theirs, count = copied(backend, f"COPY ({sql}) TO STDOUT {options}")
    ours = copy_data(_spec(options, ENCODER_NAMES), ENCODER_NAMES, ENCODER_OIDS, ENCODER_ROWS)
    assert ours == theirs
    assert count == len(ENCODER_ROWS)


@pytest.mark.parametrize("options", ["(FORMAT csv)", "(FORMAT csv, HEADER)", "", "BINARY"])
@pytest.mark.parametrize("rows", [[("\\.",), ("x",), (None,)], []], ids=["one column", "empty"])
def test_copy_encoder_one_column_and_no_rows(
    backend: psycopg.Connection[Any], options: str, rows: list[tuple[Any, ...]]
) -> None:
    """``\\.`` alone is quoted in a one-column CSV (the end-of-data marker); no rows in
    binary is one message of signature and trailer."""
    names, oids = ["\\."], [25]
    sql = values_sql(names, oids, rows or [("x",)]) + ("" if rows else " WHERE false")
    theirs, _ = copied(backend, f"COPY ({sql}) TO STDOUT {options}")
    assert copy_data(_spec(options, names), names, oids, rows) == theirs


# ---------------------------------------------------------------------------- COPY through the proxy


@pytest.mark.parametrize("options", ["", "(FORMAT csv, HEADER)", "CSV", "(FORMAT binary)"])
@pytest.mark.parametrize("query", [BY_SEX, MIXED, FOUR], ids=["by sex", "mixed", "four"])
def test_copy_of_a_dp_statement_is_postgres_copy_of_its_answer(
    proxy: Proxy,
    backend: psycopg.Connection[Any],
    seen: list[object],
    query: str,
    options: str,
) -> None:
    with client(proxy) as (conn, notices):
        values, rows = answer(conn, query)
        ours, count = copied(conn, f"COPY ({query}) TO STDOUT {options}")
        assert "LAPRAS" in notices[-1]
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE
        again = conn.execute(query).fetchall()  # the same stored answer: nothing drawn
        assert "repeat" in notices[-1] or "no budget spent" in notices[-1]
    theirs, their_count = copied(backend, f"COPY ({values}) TO STDOUT {options}")
    assert ours == theirs
    assert count == their_count == len(rows)
    assert again == rows
    assert [type(w).__name__ for w in seen] == ["CopyTo"]


def test_copy_in_a_transaction_and_after_an_error(proxy: Proxy) -> None:
    with client(proxy) as (conn, _):
        conn.execute("BEGIN")
        chunks, _ = copied(conn, f"COPY ({BY_SEX}) TO STDOUT")
        assert len(chunks) == 2
        assert conn.info.transaction_status == pq.TransactionStatus.INTRANS
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1/0")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            copied(conn, f"COPY ({BY_SEX}) TO STDOUT")
        assert conn.execute("ROLLBACK").statusmessage == "ROLLBACK"


COPY_ERRORS = [
    "(FORMAT 'CSV')",
    "(FORMAT bogus)",
    "(FORMAT csv, FORMAT csv)",
    "(DELIMITER ',,')",
    "(FORMAT binary, DELIMITER ',')",
    "(FORMAT binary, NULL 'x')",
    "(FORMAT binary, HEADER)",
    "(QUOTE '\"')",
    "(ESCAPE 'x')",
    "(FORCE_QUOTE *)",
    "(FORMAT csv, FORCE_QUOTE (zz))",
    "(FORMAT csv, FORCE_QUOTE (sex, sex))",
    "(FORMAT csv, FORCE_QUOTE sex)",
    "(FORMAT csv, FORCE_NOT_NULL (sex))",
    "(FORMAT csv, FORCE_NULL (sex))",
    "(HEADER match)",
    "(HEADER 2)",
    "(HEADER 'maybe')",
    "(DELIMITER 'a')",
    "(DELIMITER E'\\n')",
    "(NULL E'\\r')",
    "(FORMAT csv, DELIMITER ',', QUOTE ',')",
    "(DELIMITER ',', NULL 'a,b')",
    "(FORMAT csv, NULL 'a\"')",
    "(bogus 1)",
    "(ENCODING 'nope')",
    "(FORMAT csv, QUOTE 'ab')",
    "(FORMAT csv, ESCAPE '')",
    "(DEFAULT 'x')",
    "(FREEZE 3)",
    "(FORMAT csv, HEADER on, HEADER off)",
    "(FORMAT csv, FORCE_QUOTE ())",
    "WITH CSV CSV",
    "CSV QUOTE 'ab' DELIMITER 'x'",
    "(FORMAT text, DELIMITER '|', NULL 'a|b', QUOTE 'q')",
]


@pytest.mark.parametrize("options", COPY_ERRORS)
def test_copy_options_are_refused_as_postgres_refuses_them(
    proxy: Proxy, backend: psycopg.Connection[Any], options: str
) -> None:
    with client(proxy) as (conn, _):
        values, _ = answer(conn, BY_SEX)
        with pytest.raises(psycopg.Error) as ours:
            copied(conn, f"COPY ({BY_SEX}) TO STDOUT {options}")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    with pytest.raises(psycopg.Error) as theirs:
        copied(backend, f"COPY ({values}) TO STDOUT {options}")
    assert ours.value.sqlstate == theirs.value.sqlstate, (
        ours.value.diag.message_primary,
        theirs.value.diag.message_primary,
    )


@pytest.mark.parametrize(
    "target", ["'/tmp/lapras-copy.txt'", "PROGRAM 'cat > /dev/null'", "'/tmp/x' (FORMAT csv)"]
)
def test_copy_to_a_file_or_program_is_refused(proxy: Proxy, target: str) -> None:
    with client(proxy) as (conn, _):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"COPY ({BY_SEX}) TO {target}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("COPY adult TO STDOUT")
        assert not os.path.exists("/tmp/lapras-copy.txt")


@pytest.mark.asyncio
async def test_copy_messages_are_postgres_messages(proxy: Proxy, pg: Any) -> None:
    """The wire itself: CopyOutResponse with the overall and per-column formats, one
    CopyData per row, CopyDone, ``COPY n``, ReadyForQuery; on the simple protocol and on the
    extended one (Parse, Bind, Describe of the portal: NoData, Execute, Sync)."""
    from wireclient import RawClient, normalise

    from proxy.wire.messages import Bind, Describe, Execute, NoticeResponse, Parse, Query, Sync

    with client(proxy) as (conn, _):
        values, _ = answer(conn, FOUR)
    ours = await RawClient.login("127.0.0.1", proxy.port, *ANALYST, "lapras_test")
    theirs = await RawClient.login(pg.host, pg.port, *_login(pg.admin_dsn), pg.database)
    try:
        for options in ("(FORMAT binary)", "CSV HEADER"):
            exchanges = [
                lambda sql: (Query(sql=sql),),
                lambda sql: (
                    Parse(sql=sql),
                    Bind(),
                    Describe(kind="P"),
                    Execute(),
                    Sync(),
                ),
            ]
            for exchange in exchanges:
                await ours.send(*exchange(f"COPY ({FOUR}) TO STDOUT {options}"))
                mine = [m for m in await ours.until_ready() if not isinstance(m, NoticeResponse)]
                await theirs.send(*exchange(f"COPY ({values}) TO STDOUT {options}"))
                assert normalise(mine) == normalise(await theirs.until_ready())
    finally:
        await ours.close()
        await theirs.close()


@pytest.mark.asyncio
async def test_extended_protocol_cursors_and_statements_are_postgres_messages(
    proxy: Proxy, pg: Any
) -> None:
    """DECLARE, FETCH (binary rows, paged by Execute's row limit), MOVE, the protocol's Close
    of the cursor, and PREPARE/EXECUTE/DEALLOCATE, each Parse/Describe/Bind/Execute/Sync: the
    messages PostgreSQL sends for the same statements over the same rows."""
    from wireclient import RawClient, normalise

    from proxy.wire.messages import (
        Bind,
        Close,
        Describe,
        Execute,
        NoticeResponse,
        Parse,
        Query,
        Sync,
    )

    with client(proxy) as (conn, _):
        values, _ = answer(conn, FOUR)

    def extended(
        sql: str, *, formats: tuple[int, ...] = (), rows: int = 0, runs: int = 1
    ) -> tuple[object, ...]:
        return (  # the unnamed statement and portal, which the next Parse and Bind replace
            Parse(sql=sql),
            Describe(kind="S"),
            Bind(result_formats=formats),
            Describe(kind="P"),
            *[Execute(max_rows=rows)] * runs,
            Sync(),
        )

    script = [
        lambda q: (Query(sql="BEGIN"),),
        lambda q: extended(f"DECLARE c SCROLL CURSOR FOR {q}"),
        lambda q: extended("FETCH 3 FROM c", formats=(1,), rows=2, runs=3),
        lambda q: extended("MOVE BACKWARD ALL IN c"),
        lambda q: extended("FETCH ALL IN c", formats=(0, 1, 0)),
        lambda q: (Describe(kind="P", name="c"), Close(kind="P", name="c"), Sync()),
        lambda q: (Query(sql="FETCH c"),),
        lambda q: (Query(sql="ROLLBACK"),),
        lambda q: extended(f"PREPARE px AS {q}"),
        lambda q: extended("EXECUTE px", rows=3, runs=3),
        lambda q: extended("DEALLOCATE px"),
        lambda q: extended("EXECUTE px"),
        lambda q: (Query(sql="BEGIN"),),
        lambda q: extended(f"DECLARE d CURSOR FOR {q}", runs=2),  # a second run: 55000
        lambda q: (Describe(kind="P", name="d"), Sync()),  # in a failed transaction: 25P02
        lambda q: (Query(sql="ROLLBACK"),),
        lambda q: extended(f"COPY ({q}) TO STDOUT (FORMAT csv)", runs=2),
    ]
    ours = await RawClient.login("127.0.0.1", proxy.port, *ANALYST, "lapras_test")
    theirs = await RawClient.login(pg.host, pg.port, *_login(pg.admin_dsn), pg.database)
    seen_kinds: list[list[str]] = []
    try:
        for step in script:
            await ours.send_together(*step(FOUR))
            mine = [m for m in await ours.until_ready() if not isinstance(m, NoticeResponse)]
            await theirs.send_together(*step(values))
            assert normalise(mine) == normalise(await theirs.until_ready()), step(FOUR)
            seen_kinds.append([type(m).__name__ for m in mine])
    finally:
        await ours.close()
        await theirs.close()
    errors = [i for i, kinds in enumerate(seen_kinds) if "ErrorResponse" in kinds]
    # FETCH of the closed c, EXECUTE of px deallocated, a second run (55000) twice, 25P02
    assert errors == [6, 11, 13, 14, 16], seen_kinds
    assert seen_kinds[2].count("DataRow") == 3 and seen_kinds[2].count("PortalSuspended") == 1


def _login(dsn: str) -> tuple[str, str]:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(dsn)
    return unquote(parts.username or ""), unquote(parts.password or "")


PSQL = [p for p in (shutil.which("psql"), "/usr/bin/psql") if p and os.path.exists(p)]


@pytest.mark.skipif(not PSQL, reason="no psql on this machine")
@pytest.mark.parametrize(
    "command",
    [
        "\\copy ({q}) TO STDOUT",
        "\\copy ({q}) to pstdout with csv header",
        "\\copy ({q}) TO STDOUT (FORMAT csv, DELIMITER ';', FORCE_QUOTE *)",
    ],
)
def test_psql_copy_is_postgres_copy(
    proxy: Proxy, pg: Any, backend: psycopg.Connection[Any], command: str
) -> None:
    with client(proxy) as (conn, _):
        values, _ = answer(conn, MIXED)

    def run(host: str, port: int, user: str, password: str, sql: str) -> bytes:
        env = {**os.environ, "PGPASSWORD": password}
        args = ["-X", "-h", host, "-p", str(port), "-U", user, "-d", "lapras_test"]
        out = subprocess.run(
            [PSQL[0], *args, "-v", "ON_ERROR_STOP=1", "-c", command.format(q=sql)],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    ours = run("127.0.0.1", proxy.port, *ANALYST, MIXED)
    theirs = run(pg.host, pg.port, *_login(pg.admin_dsn), values)
    assert ours == theirs and ours.count(b"\n") >= 2


_CONNECTORX = """
import sys, connectorx as cx
table = cx.read_sql(sys.argv[1], sys.argv[2], protocol="binary", return_type="arrow")
print(repr(sorted(zip(*[table.column(i).to_pylist() for i in range(table.num_columns)]))))
"""


def test_connectorx_reads_a_dp_answer_by_binary_copy(proxy: Proxy, seen: list[object]) -> None:
    pytest.importorskip("connectorx")
    with client(proxy) as (conn, _):
        rows = conn.execute(BY_SEX).fetchall()
    # connectorx holds the interpreter while it reads: it runs in a process of its own
    out = subprocess.run(
        [sys.executable, "-c", _CONNECTORX, proxy.dsn, BY_SEX],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr(sorted(rows))
    assert any(isinstance(w, wrappers.CopyTo) and w.format == "binary" for w in seen)


def test_polars_over_adbc_reads_a_dp_answer_by_binary_copy(
    proxy: Proxy, seen: list[object]
) -> None:
    pl = pytest.importorskip("polars")
    pytest.importorskip("adbc_driver_postgresql")
    with client(proxy) as (conn, _):
        rows = conn.execute(MIXED).fetchall()
    frame = pl.read_database_uri(MIXED, proxy.dsn, engine="adbc")
    # (the ADBC driver reads numeric as its text)
    assert frame.rows() == [(a, b, c, str(d)) for a, b, c, d in rows]
    assert any(isinstance(w, wrappers.CopyTo) and w.format == "binary" for w in seen)


# ---------------------------------------------------------------------------- cursors

FETCHES = [
    "FETCH 1 FROM c",
    "FETCH NEXT c",
    "FETCH PRIOR c",
    "FETCH 0 c",
    "FETCH RELATIVE 0 FROM c",
    "MOVE 0 c",
    "FETCH FORWARD 2 FROM c",
    "FETCH 10 IN c",
    "FETCH c",
    "MOVE BACKWARD 1 IN c",
    "FETCH BACKWARD ALL FROM c",
    "FETCH ABSOLUTE 3 c",
    "FETCH ABSOLUTE -1 c",
    "FETCH ABSOLUTE 0 c",
    "FETCH LAST c",
    "FETCH FIRST c",
    "MOVE LAST c",
    "MOVE BACKWARD ALL c",
    "FETCH ALL c",
    "FETCH -2 c",
    "FETCH RELATIVE -1 c",
    "FETCH RELATIVE 2 c",
    "MOVE FORWARD ALL c",
    "FETCH BACKWARD 0 c",
    "MOVE ABSOLUTE 2 c",
    "FETCH FORWARD -1 c",
    "FETCH BACKWARD -1 c",
    "MOVE ALL c",
    "MOVE ABSOLUTE 9 c",
    "FETCH PRIOR c",
    "MOVE RELATIVE -3 c",
    "FETCH FORWARD ALL c",
]


def _script(conn: psycopg.Connection[Any], declare: str, commands: list[str]) -> list[object]:
    try:
        return [outcome(conn, s) for s in ["BEGIN", declare, *commands, "CLOSE c"]]
    finally:
        _drain(conn)


@pytest.mark.parametrize(
    ("options", "commands"),
    [
        ("SCROLL", FETCHES),
        ("SCROLL", FETCHES[::-1]),
        ("BINARY SCROLL", FETCHES[:12]),
        ("NO SCROLL", ["FETCH 1 c", "FETCH 2 c", "MOVE 1 c", "FETCH ALL c", "FETCH c"]),
        ("NO SCROLL", ["FETCH 2 c", "FETCH 0 c", "FETCH 1 c"]),
        ("NO SCROLL", ["MOVE 0 c", "FETCH 0 c", "FETCH ABSOLUTE 2 c", "FETCH ABSOLUTE 1 c"]),
        ("NO SCROLL", ["FETCH 3 c", "MOVE BACKWARD ALL c"]),
        ("NO SCROLL", ["FETCH ABSOLUTE 0 c", "FETCH ABSOLUTE 0 c", "FETCH 1 c", "FETCH PRIOR c"]),
        ("SCROLL CURSOR WITH HOLD", FETCHES[:8]),
    ],
)
def test_fetch_and_move_as_postgres(
    proxy: Proxy, backend: psycopg.Connection[Any], options: str, commands: list[str]
) -> None:
    """FETCH and MOVE in every direction over a cursor of a DP answer and over a cursor of
    the same rows in PostgreSQL: the same rows, formats, tags, errors and states."""
    declare = f"DECLARE c {options}" + ("" if "CURSOR" in options else " CURSOR") + " FOR {}"
    with client(proxy) as (conn, _):
        values, rows = answer(conn, FOUR)
        assert len(rows) == 4
        ours = _script(conn, declare.format(FOUR), commands)
    theirs = _script(backend, declare.format(values), commands)
    assert ours == theirs
    if "NO SCROLL" not in options:  # nothing but answers to compare
        assert all(o[0] != "error" for o in ours), ours
    assert sum(len(o[3]) for o in ours if o[0] == "TUPLES_OK") > 0


@pytest.mark.parametrize("seed", range(12))
def test_random_cursor_walks_as_postgres(
    proxy: Proxy, backend: psycopg.Connection[Any], seed: int
) -> None:
    rnd = random.Random(seed)
    commands = []
    for _ in range(25):
        verb = rnd.choice(["FETCH", "MOVE"])
        how = rnd.choice(
            [
                "", "NEXT", "PRIOR", "FIRST", "LAST", "ALL", "FORWARD", "BACKWARD",
                "FORWARD ALL", "BACKWARD ALL", f"{rnd.randint(-6, 6)}",
                f"ABSOLUTE {rnd.randint(-6, 6)}", f"RELATIVE {rnd.randint(-6, 6)}",
                f"FORWARD {rnd.randint(-6, 6)}", f"BACKWARD {rnd.randint(-6, 6)}",
            ]
        )  # fmt: skip
        commands.append(f"{verb} {how} {rnd.choice(['FROM ', 'IN ', ''])}c")
    hold = rnd.choice(["", " WITH HOLD"])
    declare = "DECLARE c SCROLL CURSOR" + hold + " FOR {}"
    with client(proxy) as (conn, _):
        values, _ = answer(conn, FOUR)
        ours = _script(conn, declare.format(FOUR), commands)
    theirs = _script(backend, declare.format(values), commands)
    assert ours == theirs, commands
    assert all(o[0] != "error" for o in ours), ours


def test_cursor_errors_and_lifetimes_as_postgres(
    proxy: Proxy, backend: psycopg.Connection[Any]
) -> None:
    """DECLARE without HOLD outside a transaction block (25P01), a name taken (42P03), an
    unknown cursor (34000), a failed transaction (25P02); a cursor without HOLD ends with
    its transaction, one WITH HOLD outlives a COMMIT and not a ROLLBACK; one Query of several
    statements is one transaction block."""
    steps = [
        "DECLARE c CURSOR FOR {q}",
        "DECLARE c CURSOR WITHOUT HOLD FOR {q}",
        "BEGIN",
        "DECLARE c CURSOR FOR {q}",
        "DECLARE c NO SCROLL CURSOR FOR {q}",
        "FETCH 1 FROM c",
        "COMMIT",
        "FETCH 1 FROM c",
        "BEGIN",
        "DECLARE h CURSOR WITH HOLD FOR {q}",
        "FETCH 1 FROM h",
        "ROLLBACK",
        "FETCH h",
        "BEGIN",
        "DECLARE h CURSOR WITH HOLD FOR {q}",
        "FETCH 1 FROM h",
        "END",
        "FETCH h",
        "MOVE 1 IN h",
        "DECLARE h CURSOR WITH HOLD FOR {q}",
        "BEGIN",
        "DECLARE c CURSOR FOR {q}",
        "SELECT 1/0",
        "FETCH c",
        "CLOSE c",
        "CLOSE h",
        "DECLARE d CURSOR FOR {q}",
        "COMMIT",
        "FETCH ALL IN h",
        "DECLARE d CURSOR FOR {q}; FETCH ALL IN d",
        "FETCH d",
        "DECLARE e CURSOR WITH HOLD FOR {q}; FETCH 2 IN e",
        "FETCH e",
        "CLOSE e",
        "CLOSE e",
        "CLOSE h",
        "CLOSE h",
        "BEGIN",
        "DECLARE x CURSOR WITH HOLD FOR {q}",
        "COMMIT AND NO CHAIN",
        "FETCH 1 x",
        "CLOSE ALL",
        "FETCH 1 x",
    ]
    with client(proxy) as (conn, _):
        values, _ = answer(conn, FOUR)
        ours = [outcome(conn, s.format(q=FOUR)) for s in steps]
    theirs = [outcome(backend, s.format(q=values)) for s in steps]
    assert ours == theirs


def test_a_cursor_is_answered_once_at_declare(proxy: Proxy) -> None:
    """The budget is spent at the DECLARE (one fresh answer, its NOTICE); FETCHes page through
    the stored rows; the plain statement afterwards is the same stored answer."""
    query = OVER.format(47)
    with client(proxy) as (conn, notices):
        conn.execute("BEGIN")
        conn.execute(f"DECLARE once SCROLL CURSOR FOR {query}")
        assert len(notices) == 1 and "fresh noise" in notices[0]
        first = conn.execute("FETCH ALL FROM once").fetchall()
        for _ in range(3):
            assert conn.execute("FETCH FIRST FROM once").fetchall() == first
        assert len(notices) == 1
        conn.execute("COMMIT")
        assert conn.execute(query).fetchall() == first
        assert len(notices) == 2 and "repeat" in notices[1]


def test_psqlodbc_use_declare_fetch(proxy: Proxy, backend: psycopg.Connection[Any]) -> None:
    """psqlODBC with UseDeclareFetch=1: BEGIN, the cursor WITH HOLD and its first FETCH in
    one Query; more FETCHes; CLOSE; COMMIT."""
    name = '"SQL_CUR0x55d0c0a1b2c3"'
    steps = [
        f"BEGIN;declare {name} cursor with hold for {{q}};fetch 3 in {name}",
        f"fetch 3 in {name}",
        f"close {name}",
        "COMMIT",
        f"BEGIN;declare {name} cursor with hold for {{q}};fetch 100 in {name}",
        "COMMIT",
        f"fetch 100 in {name}",
        f"close {name}",
    ]
    with client(proxy) as (conn, _):
        values, _ = answer(conn, FOUR)
        ours = [outcome(conn, s.format(q=FOUR)) for s in steps]
    theirs = [outcome(backend, s.format(q=values)) for s in steps]
    assert ours == theirs
    assert ours[0][3] and ours[4][1] == b"FETCH 4"


def test_binary_cursor_and_portal_description_as_postgres(
    proxy: Proxy, backend: psycopg.Connection[Any]
) -> None:
    """A BINARY cursor sends binary rows to a simple FETCH; the protocol's Describe of the
    cursor (what psycopg sends after DECLARE) gives its columns in text format."""

    def run(conn: psycopg.Connection[Any], q: str) -> list[object]:
        out: list[object] = [
            outcome(conn, "BEGIN"),
            outcome(conn, f"DECLARE b BINARY CURSOR FOR {q}"),
        ]
        d = describe_portal(conn, b"b")
        out.append([(d.fname(i), d.ftype(i), d.fformat(i)) for i in range(d.nfields)])
        out += [outcome(conn, "FETCH 2 b"), outcome(conn, "FETCH ALL b")]
        missing = describe_portal(conn, b"nope")
        out.append(missing.error_field(pq.DiagnosticField.SQLSTATE))
        _drain(conn)
        return out

    with client(proxy) as (conn, _):
        values, _ = answer(conn, MIXED)
        ours = run(conn, MIXED)
    assert ours == run(backend, values)
    assert ours[3][2] == (1, 1, 1, 1)  # type: ignore[index]


def test_psycopg_server_side_cursors(proxy: Proxy) -> None:
    with client(proxy) as (auto, _):
        plain = auto.execute(FOUR).fetchall()
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            auto.cursor(name="nohold").execute(FOUR)
        with auto.cursor(name="held", withhold=True) as cur:
            cur.execute(FOUR)
            assert cur.fetchone() == plain[0]
            assert cur.fetchall() == plain[1:]
    with psycopg.connect(proxy.dsn) as conn:  # a transaction, as psycopg opens one
        with conn.cursor(name="c") as cur:
            cur.execute(FOUR)
            assert [d.name for d in cur.description or ()] == ["sex", "income", "count"]
            assert cur.fetchmany(3) == plain[:3]
            assert list(cur) == plain[3:]
        with conn.cursor(name="s", scrollable=True) as cur:
            cur.execute(FOUR)
            assert cur.fetchall() == plain
            cur.scroll(1, mode="absolute")
            assert cur.fetchone() == plain[1]
            cur.scroll(-2)
            assert cur.fetchone() == plain[0]
        with conn.cursor(name="p") as cur:
            cur.execute("SELECT count(*) FROM adult WHERE age > %s AND sex = %s", (30, "Male"))
            server = cur.fetchall()
        direct = conn.execute("SELECT count(*) FROM adult WHERE age > 30 AND sex = 'Male'")
        assert server == direct.fetchall()
        with conn.cursor(name="w", withhold=True) as cur:
            cur.execute(FOUR)
            conn.commit()  # a cursor WITH HOLD outlives its transaction
            assert cur.fetchall() == plain
        conn.commit()
        with conn.cursor() as cur:
            cur.execute("DECLARE bin CURSOR FOR " + FOUR)
            cur.execute("FETCH 2 FROM bin", binary=True)  # the extended protocol, binary rows
            assert cur.fetchall() == plain[:2]
            cur.execute("FETCH ALL FROM bin")
            assert cur.fetchall() == plain[2:] and cur.statusmessage == "FETCH 2"
        conn.rollback()


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2"])
def test_sqlalchemy_stream_results(proxy: Proxy, driver: str, seen: list[object]) -> None:
    """SQLAlchemy's server-side cursors: psycopg 3 (``DECLARE "c_…" CURSOR FOR``) and psycopg2
    (``DECLARE "c_…" CURSOR WITHOUT HOLD FOR``, ``FETCH FORWARD n FROM``, ``CLOSE``)."""
    sa = pytest.importorskip("sqlalchemy")
    pytest.importorskip(driver)
    engine = sa.create_engine(proxy.dsn.replace("postgresql://", f"postgresql+{driver}://"))
    try:
        with engine.connect() as conn:
            plain = [tuple(r) for r in conn.execute(sa.text(FOUR))]
            streamed = conn.execution_options(stream_results=True, yield_per=1).execute(
                sa.text(FOUR)
            )
            assert [tuple(r) for r in streamed] == plain
            partitions = conn.execution_options(stream_results=True).execute(
                sa.text("SELECT count(*) FROM adult WHERE age > :a"), {"a": 30}
            )
            direct = conn.execute(sa.text(OVER.format(30)))
            assert [tuple(r) for r in partitions] == [tuple(r) for r in direct]
    finally:
        engine.dispose()
    cursors = [w for w in seen if isinstance(w, wrappers.DeclareCursor)]
    assert len(cursors) >= 2 and not any(c.hold for c in cursors)


def test_cursors_of_other_statements_are_the_backends(
    proxy: Proxy, backend: psycopg.Connection[Any]
) -> None:
    """A cursor over a statement the proxy relays is the backend's own (pg_cursors shows it,
    not the proxy's); FETCH, MOVE, CLOSE of it are relayed; names are shared both ways."""
    with client(proxy) as (conn, _):
        conn.execute("BEGIN")
        conn.execute("DECLARE r SCROLL CURSOR FOR SELECT g FROM generate_series(1, 5) g")
        conn.execute(f"DECLARE l CURSOR FOR {FOUR}")
        names = [n for (n,) in conn.execute("SELECT name FROM pg_cursors ORDER BY 1")]
        assert names == ["r"]
        assert conn.execute("FETCH 2 FROM r").fetchall() == [(1,), (2,)]
        assert conn.execute("MOVE LAST IN r").statusmessage == "MOVE 1"  # the backend's own
        assert len(conn.execute("FETCH ALL FROM l").fetchall()) == 4
        with pytest.raises(psycopg.errors.DuplicateCursor):
            conn.execute("DECLARE l CURSOR FOR SELECT 1")  # the backend has no l
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        conn.execute("DECLARE r CURSOR FOR SELECT 1")
        with pytest.raises(psycopg.errors.DuplicateCursor):
            conn.execute(f"DECLARE r CURSOR FOR {FOUR}")  # the backend has r
        conn.execute("ROLLBACK")


# ---------------------------------------------------------------------------- SQL PREPARE


def test_sql_prepare_execute_deallocate_as_postgres(
    proxy: Proxy, backend: psycopg.Connection[Any]
) -> None:
    with client(proxy) as (conn, _):
        plain = conn.execute(OVER.format(30)).fetchall()
        steps = [
            ("PREPARE p(int) AS {over}", "PREPARE p(int) AS {over_values}"),
            ("EXECUTE p(30)", None),
            ("EXECUTE p (30::int)", None),
            ("PREPARE p AS {q}", None),
            ("EXECUTE p(1, 2)", None),
            ("EXECUTE p('thirty')", None),
            ("DEALLOCATE p", None),
            ("EXECUTE p(30)", None),
            ("DEALLOCATE PREPARE p", None),
            ("PREPARE q AS {q}", "PREPARE q AS {q_values}"),
            ("EXECUTE q", None),
            ("EXECUTE q(7)", None),
            ("PREPARE bad(nosuchtype) AS {q}", "PREPARE bad(nosuchtype) AS {q_values}"),
            ("PREPARE r AS SELECT 1", None),
            ("PREPARE r AS {q}", "PREPARE r AS {q_values}"),
            ("PREPARE q AS SELECT 1", None),
            ("BEGIN", None),
            ("SELECT 1/0", None),
            ("EXECUTE q", None),
            ("DEALLOCATE q", None),
            ("PREPARE z AS {q}", "PREPARE z AS {q_values}"),
            ("ROLLBACK", None),
            ("DEALLOCATE ALL", None),
            ("EXECUTE q", None),
            ("EXECUTE r", None),
            ("PREPARE q AS {q}", "PREPARE q AS {q_values}"),
            ("DECLARE dc CURSOR WITH HOLD FOR {q}", "DECLARE dc CURSOR WITH HOLD FOR {q_values}"),
            ("FETCH 1 dc", None),
            ("DISCARD ALL", None),
            ("EXECUTE q", None),
            ("FETCH 1 dc", None),
        ]
        values, _ = answer(conn, BY_SEX)
        subs = {
            "over": "SELECT count(*) FROM adult WHERE age > $1",
            "q": BY_SEX,
        }
        ours = [outcome(conn, s.format(**subs)) for s, _ in steps]
        assert ours[1][3] == [(str(plain[0][0]).encode(),)]  # EXECUTE p(30): the stored answer
    over_values = f"SELECT v.count FROM (VALUES ({plain[0][0]}::int8)) v(count) WHERE $1 > 0"
    subs_pg = {
        "over": over_values,
        "over_values": over_values,
        "q": values,
        "q_values": values,
    }
    theirs = [outcome(backend, (pg or s).format(**subs_pg)) for s, pg in steps]
    _drain(backend)
    assert ours == theirs


def test_dbd_pg_deallocates_a_statement_it_prepared_with_the_protocol(
    proxy: Proxy, pg: Any
) -> None:
    """DBD::Pg prepares with the protocol (Parse "dbdpg_p<pid>_<n>") and later sends the SQL
    ``DEALLOCATE dbdpg_...`` by itself. The statement was answered here, never prepared on
    the backend: the DEALLOCATE is answered here too, so the transaction stays healthy and
    its COMMIT commits."""
    role = provision.analyst_role(ANALYST[0])
    with psycopg.connect(pg.admin_dsn, autocommit=True) as a:
        a.execute("DROP SCHEMA IF EXISTS wrappers_scratch CASCADE")
        a.execute("CREATE SCHEMA wrappers_scratch")
        a.execute("CREATE TABLE wrappers_scratch.kept (x int)")
        a.execute(f'GRANT USAGE ON SCHEMA wrappers_scratch TO "{role}"')
        a.execute(f'GRANT SELECT, INSERT ON wrappers_scratch.kept TO "{role}"')
    try:
        with client(proxy) as (conn, _):
            pgc = conn.pgconn
            assert outcome(conn, "BEGIN")[1] == b"BEGIN"
            assert outcome(conn, "INSERT INTO wrappers_scratch.kept VALUES (1)")[1] == b"INSERT 0 1"
            r = pgc.prepare(b"dbdpg_p4242_1", BY_SEX.encode())
            assert pq.ExecStatus(r.status) == pq.ExecStatus.COMMAND_OK
            r = pgc.exec_prepared(b"dbdpg_p4242_1", [])
            assert r.ntuples == 2
            assert outcome(conn, "DEALLOCATE dbdpg_p4242_1") == (
                "COMMAND_OK", b"DEALLOCATE", (), [], "INTRANS"
            )  # fmt: skip
            r = pgc.exec_prepared(b"dbdpg_p4242_1", [])  # gone: the backend says so
            assert r.error_field(pq.DiagnosticField.SQLSTATE) == b"26000"
            assert outcome(conn, "ROLLBACK")[1] == b"ROLLBACK"
            assert outcome(conn, "BEGIN")[1] == b"BEGIN"
            assert outcome(conn, "INSERT INTO wrappers_scratch.kept VALUES (2)")[1] == b"INSERT 0 1"
            pgc.prepare(b"dbdpg_p4242_2", OVER.format("$1").encode())
            assert pgc.exec_prepared(b"dbdpg_p4242_2", [b"40"]).ntuples == 1
            assert outcome(conn, 'DEALLOCATE PREPARE "dbdpg_p4242_2"')[1] == b"DEALLOCATE"
            assert outcome(conn, "COMMIT")[1:] == (b"COMMIT", (), [], "IDLE")
            kept = conn.execute("SELECT x FROM wrappers_scratch.kept").fetchall()
        assert kept == [(2,)]  # the first transaction rolled back, the second committed
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as a:
            a.execute("DROP SCHEMA wrappers_scratch CASCADE")


def test_explain_of_a_dp_statement_is_a_cost_preview(proxy: Proxy) -> None:
    """EXPLAIN of a DP statement is the proxy's cost preview, never the backend's plan (its
    estimates come from the data); EXPLAIN ANALYZE of one stays refused."""
    with client(proxy) as (conn, _):
        lines = [r[0] for r in conn.execute(f"EXPLAIN {BY_SEX}").fetchall()]
        assert lines[0].startswith("LAPRAS cost preview")
        assert not any("Seq Scan" in line or "rows=" in line for line in lines)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"EXPLAIN (ANALYZE, COSTS off) {FOUR}")
        assert conn.execute("EXPLAIN SELECT 1").fetchall()  # the backend's own


def test_state_is_per_session(proxy: Proxy) -> None:
    """One session's cursors and statements are its own: another session cannot see them."""
    with client(proxy) as (a, _), client(proxy) as (b, _):
        a.execute(f"DECLARE mine CURSOR WITH HOLD FOR {BY_SEX}")
        a.execute(f"PREPARE mine AS {BY_SEX}")
        with pytest.raises(psycopg.errors.InvalidCursorName):
            b.execute("FETCH mine")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            b.execute("EXECUTE mine")
        assert len(a.execute("FETCH ALL mine").fetchall()) == 2
        assert len(a.execute("EXECUTE mine").fetchall()) == 2
