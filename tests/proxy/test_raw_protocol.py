"""Raw-protocol tests: the proxy's answers diffed against the real PostgreSQL's.

Each case sends the same hand-built messages to the backend directly (as the passthrough
role) and through the proxy, and compares the decoded replies (ignoring F/L/R source fields).
Cases follow pgwire-research §4.6 / Appendix B.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest
from conftest import Proxy
from wireclient import RawClient, normalise

from proxy.wire.messages import (
    Bind,
    BindComplete,
    Close,
    CommandComplete,
    DataRow,
    Describe,
    ErrorResponse,
    Execute,
    Flush,
    NoticeResponse,
    ParameterDescription,
    Parse,
    ParseComplete,
    Query,
    ReadyForQuery,
    RowDescription,
    Sync,
)
from proxy.wire.protocol import ConnState
from proxy.wire.relay import Kind
from proxy.wire.upstream import UpstreamConfig

Connect = Callable[[], Awaitable[RawClient]]
_STATE = {"I": ConnState.READY, "T": ConnState.IN_TRANSACTION}


@pytest.fixture
def direct(pg):  # type: ignore[no-untyped-def]
    cfg = UpstreamConfig.from_dsn(pg.passthrough_dsn)

    async def connect() -> RawClient:
        return await RawClient.login(cfg.host, cfg.port, cfg.user, cfg.password, cfg.database)

    return connect


@pytest.fixture(params=["sync router", "async router"])
def proxied(request):  # type: ignore[no-untyped-def]
    """The proxy with a router that decides at once (relayed from the read callback) and
    with one that decides in a coroutine (relayed by the session's task)."""
    p = request.getfixturevalue("proxy" if request.param == "sync router" else "async_router_proxy")

    async def connect() -> RawClient:
        return await RawClient.login(p.host, p.port, p.user, p.password, p.database)

    return connect


async def _both(
    direct: Connect, proxied: Connect, *batches: tuple[object, ...]
) -> tuple[list[object], list[object]]:
    out = []
    for connect in (direct, proxied):
        c = await connect()
        got: list[object] = []
        try:
            for batch in batches:
                await c.send(*batch)
                got += normalise(await c.until_ready())
        finally:
            await c.close()
        out.append(got)
    return out[0], out[1]


CASES: dict[str, list[tuple[object, ...]]] = {
    # PostgreSQL checks privileges at Bind: a protected table's statement parses and
    # describes, and is refused when bound (the backend refuses the passthrough role too).
    "row access refused at Bind": [
        (
            Parse(name="r", sql="SELECT * FROM adult WHERE age > $1"),
            Describe(kind="S", name="r"),
            Sync(),
        ),
        (Bind(statement="r", params=(b"30",)), Execute(), Sync()),
        (Parse(sql="SELECT age FROM adult"), Bind(), Describe(kind="P"), Execute(), Sync()),
        (Close(kind="S", name="r"), Sync()),
    ],
    "Bind in a failed transaction, to a statement prepared before (answered here)": [
        (Parse(name="c", sql="SELECT count(*) FROM adult WHERE age > $1"), Sync()),
        (Query(sql="BEGIN; SELECT 1/0"),),
        (Bind(statement="c", params=(b"30",)), Execute(), Sync()),
        (Query(sql="ROLLBACK"),),
    ],
    "syntax error on a protected table at Parse": [
        (Parse(sql="SELECT * FROM adult WHERE"), Bind(), Execute(), Sync()),
    ],
    "empty query": [(Query(sql=""),), (Query(sql=";"),)],
    "multi-statement error in the middle": [
        (Query(sql="SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3"),)
    ],
    "transaction failed then commit": [
        (Query(sql="BEGIN"),),
        (Query(sql="SELECT * FROM nosuch"),),
        (Query(sql="SELECT 1"),),
        (Query(sql="COMMIT"),),
    ],
    "set application_name reports ParameterStatus": [
        (Query(sql="SET application_name = 'x'"),),
        (Query(sql="SHOW application_name"),),
    ],
    "notice": [(Query(sql="DO $$BEGIN RAISE NOTICE 'hello'; END$$"),)],
    "division by zero": [(Query(sql="SELECT 1/0"),)],
    "parse+describe with inferred parameter types (local statement)": [
        (
            Parse(sql="SELECT count(*) FROM adult WHERE age > $1"),
            Describe(kind="S"),
            Sync(),
        )
    ],
    "parse error skips to sync": [
        (
            Parse(sql="SELECT * FROM nosuch"),
            Bind(),
            Describe(kind="P"),
            Execute(),
            Sync(),
        ),
        (Query(sql="SELECT 1"),),
    ],
    "bind to unknown statement": [(Bind(statement="nosuchstmt"), Execute(), Sync())],
    "duplicate named statement": [
        (Parse(name="s1", sql="SELECT 1"), Parse(name="s1", sql="SELECT 2"), Sync())
    ],
    "close unknown statement and portal": [
        (Close(kind="S", name="nonexistent"), Close(kind="P", name="nonexistent"), Sync())
    ],
    "describe utility statement": [
        (
            Parse(sql="SET extra_float_digits = 3"),
            Describe(kind="S"),
            Bind(),
            Execute(),
            Sync(),
        )
    ],
    "portal suspended": [
        (
            Parse(sql="SELECT generate_series(1, 5)"),
            Bind(portal="p1"),
            Execute(portal="p1", max_rows=2),
            Execute(portal="p1", max_rows=2),
            Execute(portal="p1", max_rows=2),
            Sync(),
        )
    ],
    "binary parameter and result": [
        (
            Parse(sql="SELECT $1::int4 + 0", param_oids=(23,)),
            Bind(param_formats=(1,), params=(struct.pack("!i", 42),), result_formats=(1,)),
            Describe(kind="P"),
            Execute(),
            Sync(),
        )
    ],
    "binary numeric int8 text date": [
        (
            Parse(sql="SELECT 1.5::numeric, 10::int8, 'x'::text, '2026-11-29'::date"),
            Bind(result_formats=(1,)),
            Describe(kind="P"),
            Execute(),
            Sync(),
        )
    ],
    "multi-statement parse": [(Parse(sql="SELECT 1; SELECT 2"), Sync())],
    "simple query with $1": [(Query(sql="SELECT $1"),)],
    "named statement reused": [
        (Parse(name="q", sql="SELECT $1::text || 'b'"), Sync()),
        (Bind(statement="q", params=(b"a",)), Execute(), Sync()),
        (Bind(statement="q", params=(b"c",)), Execute(), Close(kind="S", name="q"), Sync()),
        (Bind(statement="q", params=(b"c",)), Execute(), Sync()),
    ],
    "row-level on protected table, error codes": [
        (Query(sql="SELECT * FROM adult"),),
        (Query(sql="BEGIN"),),
        (Query(sql="SELECT age FROM adult"),),
        (Query(sql="SELECT 1"),),
        (Query(sql="COMMIT"),),
    ],
    "catalogue OIDs": [
        (Query(sql="SELECT c.oid, c.relname FROM pg_class c WHERE relname = 'adult'"),)
    ],
    "savepoints": [
        (Query(sql="BEGIN; SAVEPOINT a; SELECT 1/0"),),
        (Query(sql="ROLLBACK TO SAVEPOINT a"),),
        (Query(sql="SELECT 1; COMMIT"),),
    ],
    "copy out": [(Query(sql="COPY (SELECT generate_series(1,3)) TO STDOUT"),)],
    "copy of a protected table": [(Query(sql="COPY adult TO STDOUT"),)],
    "refusal and local answer in a failed transaction": [
        (Query(sql="BEGIN"),),
        (Query(sql="SELECT 1/0"),),
        (Query(sql="SELECT * FROM adult"),),
        (Query(sql="SELECT count(*) FROM adult WHERE age > 3"),),
        (
            Parse(sql="SELECT count(*) FROM adult WHERE age > $1"),
            Bind(params=(b"3",)),
            Execute(),
            Sync(),
        ),
        (Query(sql="ROLLBACK"),),
        (Query(sql="SELECT 1"),),
    ],
    "explain of a protected table": [(Query(sql="EXPLAIN SELECT * FROM adult"),)],
}


def _strip_detail(msgs: list[object]) -> list[object]:
    # The proxy's refusal adds DETAIL/HINT; compare S/V/C/M only for these cases.
    out = []
    for m in msgs:
        if isinstance(m, tuple) and m[0] == "ErrorResponse":
            m = (m[0], tuple((c, v) for c, v in m[1] if c in "SVCM"))
        out.append(m)
    return out


@pytest.mark.parametrize("case", list(CASES))
async def test_same_as_postgres(case: str, direct: Connect, proxied: Connect) -> None:
    d, p = await _both(direct, proxied, *CASES[case])
    assert _strip_detail(p) == _strip_detail(d)


async def test_flush_without_sync(proxied: Connect, direct: Connect) -> None:
    for connect in (direct, proxied):
        c = await connect()
        await c.send(Parse(sql="SELECT 1"), Bind(), Describe(kind="P"), Execute(), Flush())
        got = await c.read_n(5)
        assert [type(m) for m in got] == [
            ParseComplete,
            BindComplete,
            RowDescription,
            DataRow,
            CommandComplete,
        ]
        await c.send(Sync())
        assert isinstance(await c.read(), ReadyForQuery)
        await c.close()


async def test_pg8000_flush_after_every_message(proxied: Connect) -> None:
    c = await proxied()
    await c.send(Parse(sql="SELECT count(*) FROM adult WHERE age > $1"), Flush())
    assert isinstance(await c.read(), ParseComplete)
    await c.send(Describe(kind="S"), Flush())
    pd, rd = await c.read_n(2)
    assert isinstance(pd, ParameterDescription) and pd.oids == (23,)
    assert isinstance(rd, RowDescription) and rd.fields[0].type_oid == 20
    await c.send(Bind(params=(b"30",)), Flush())
    assert isinstance(await c.read(), BindComplete)
    await c.send(Execute(), Flush())
    notice, row, done = await c.read_n(3)
    assert isinstance(notice, NoticeResponse)
    assert row == DataRow(values=(b"1030",))
    assert done == CommandComplete(tag="SELECT 1")
    await c.send(Sync())
    assert await c.read() == ReadyForQuery(status="I")
    await c.close()


async def test_pipeline_mixes_local_and_relayed_in_order(proxied: Connect) -> None:
    c = await proxied()
    await c.send(
        Parse(sql="SELECT 1"),
        Bind(),
        Execute(),
        Parse(name="local", sql="SELECT count(*) FROM adult WHERE age > $1"),
        Bind(
            statement="local",
            params=(struct.pack("!i", 5),),
            param_formats=(1,),
            result_formats=(1,),
        ),
        Describe(kind="P"),
        Execute(),
        Parse(sql="SELECT 2"),
        Bind(),
        Execute(),
        Sync(),
    )
    got = await c.until_ready()
    kinds = [type(m).__name__ for m in got]
    assert kinds == [
        "ParseComplete", "BindComplete", "DataRow", "CommandComplete",
        "ParseComplete", "BindComplete", "RowDescription", "NoticeResponse", "DataRow",
        "CommandComplete",
        "ParseComplete", "BindComplete", "DataRow", "CommandComplete",
        "ReadyForQuery",
    ]  # fmt: skip
    assert got[2] == DataRow(values=(b"1",))
    assert got[8] == DataRow(values=(struct.pack("!q", 1005),))
    assert got[12] == DataRow(values=(b"2",))
    await c.close()


async def test_refusal_in_pipeline_skips_to_sync_and_fails_transaction(proxied: Connect) -> None:
    c = await proxied()
    await c.send(Query(sql="BEGIN"))
    await c.until_ready()
    await c.send(
        Parse(sql="SELECT 1"),
        Bind(),
        Execute(),
        Parse(sql="SELECT * FROM adult"),
        Bind(),
        Execute(),
        Parse(sql="SELECT 2"),
        Bind(),
        Execute(),
        Sync(),
    )
    got = await c.until_ready()
    assert [type(m).__name__ for m in got] == [
        "ParseComplete", "BindComplete", "DataRow", "CommandComplete",
        "ParseComplete", "ErrorResponse", "ReadyForQuery",
    ]  # fmt: skip
    err = got[5]
    assert isinstance(err, ErrorResponse) and err.sqlstate == "42501"
    assert got[-1] == ReadyForQuery(status="E")
    await c.send(Query(sql="SELECT 1"))
    got = await c.until_ready()
    assert isinstance(got[0], ErrorResponse) and got[0].sqlstate == "25P02"
    await c.send(Query(sql="COMMIT"))
    assert await c.until_ready() == [CommandComplete(tag="ROLLBACK"), ReadyForQuery(status="I")]
    await c.close()


async def test_refusal_outside_transaction_rolls_back_implicit_batch(proxied: Connect) -> None:
    c = await proxied()
    await c.send(
        Parse(sql="SELECT set_config('application_name', 'changed', false)"),
        Bind(),
        Execute(),
        Parse(sql="SELECT * FROM adult"),
        Bind(),
        Execute(),
        Sync(),
    )
    got = await c.until_ready()
    assert isinstance(got[-2], ErrorResponse) and got[-1] == ReadyForQuery(status="I")
    await c.send(Query(sql="SHOW application_name"))
    got = await c.until_ready()
    # The set_config was rolled back with the implicit transaction, as PostgreSQL does.
    assert DataRow(values=(b"",)) in got
    await c.close()


async def test_local_answer_simple_and_multi_statement(proxied: Connect) -> None:
    c = await proxied()
    await c.send(Query(sql="SELECT 1; SELECT count(*) FROM adult WHERE age > 7; SELECT 3"))
    got = normalise(await c.until_ready())
    names = [type(m).__name__ if not isinstance(m, tuple) else m[0] for m in got]
    assert names == [
        "RowDescription", "DataRow", "CommandComplete",
        "NoticeResponse", "RowDescription", "DataRow", "CommandComplete",
        "RowDescription", "DataRow", "CommandComplete", "ReadyForQuery",
    ]  # fmt: skip
    rd = got[4]
    assert isinstance(rd, RowDescription) and rd.fields[0].name == "count"
    assert rd.fields[0].type_oid == 20
    assert got[5] == DataRow(values=(b"1007",))
    await c.close()


async def test_zero_row_probe_answered_with_columns(proxied: Connect, direct: Connect) -> None:
    c = await proxied()
    await c.send(Query(sql="SELECT * FROM adult WHERE 1 <> 1 LIMIT 0"))
    got = await c.until_ready()
    assert [type(m).__name__ for m in got] == ["RowDescription", "CommandComplete", "ReadyForQuery"]
    d = await direct()
    await d.send(Parse(sql="SELECT * FROM adult"), Describe(kind="S"), Sync())
    want = next(m for m in await d.until_ready() if isinstance(m, RowDescription))
    assert got[0] == want and got[1] == CommandComplete(tag="SELECT 0")
    await c.close()
    await d.close()


async def test_local_execution_error_fails_the_transaction(proxied: Connect) -> None:
    c = await proxied()
    await c.send(Query(sql="BEGIN"))
    await c.until_ready()
    await c.send(Query(sql="SELECT count(*) FROM adult WHERE age > 998"))
    got = await c.until_ready()
    assert isinstance(got[0], ErrorResponse) and got[0].sqlstate == "42Q01"
    assert got[-1] == ReadyForQuery(status="E")
    await c.send(Query(sql="SELECT 1"))
    got = await c.until_ready()
    assert isinstance(got[0], ErrorResponse) and got[0].sqlstate == "25P02"
    await c.send(Query(sql="COMMIT"))
    assert await c.until_ready() == [CommandComplete(tag="ROLLBACK"), ReadyForQuery(status="I")]
    # Extended protocol, outside a transaction block: error, skip to Sync, status I.
    await c.send(
        Parse(sql="SELECT count(*) FROM adult WHERE age > $1"),
        Bind(params=(b"998",)),
        Execute(),
        Parse(sql="SELECT 1"),
        Sync(),
    )
    got = await c.until_ready()
    assert [type(m).__name__ for m in got] == [
        "ParseComplete", "BindComplete", "ErrorResponse", "ReadyForQuery",
    ]  # fmt: skip
    assert got[-1] == ReadyForQuery(status="I")
    await c.close()


async def test_mixed_multi_statement_is_one_implicit_transaction(
    proxied: Connect, direct: Connect
) -> None:
    batches = [
        (
            Query(
                sql="SELECT set_config('application_name', 'changed', false); SELECT * FROM adult"
            ),
        ),
        (Query(sql="SHOW application_name"),),
        (
            Query(
                sql="SELECT set_config('application_name', 'kept', false); "
                "SELECT count(*) FROM adult WHERE age > 1"
            ),
        ),
        (Query(sql="SHOW application_name"),),
    ]
    c = await proxied()
    got = []
    for b in batches:
        await c.send(*b)
        got.append(await c.until_ready())
    await c.close()
    assert isinstance(got[0][-2], ErrorResponse) and got[0][-1] == ReadyForQuery(status="I")
    assert DataRow(values=(b"",)) in got[1]  # rolled back with the refused statement
    assert DataRow(values=(b"1001",)) in got[2]
    assert DataRow(values=(b"kept",)) in got[3]  # committed


async def test_repeated_read_follows_its_statement_and_state(proxied: Connect) -> None:
    """A Bind/Execute/Sync read that comes again byte for byte (as clients repeat it for
    every execution of a prepared statement) is relayed from the session's memory of it
    only while its statement is still relayed and the session is in the same state: inside
    a transaction the backend's status comes back, and once the name is prepared again as a
    statement answered here, the same bytes get the local answer."""
    c = await proxied()
    run = (Bind(statement="s"), Execute(), Sync())

    async def ask() -> list[object]:
        await c.send_together(*run)
        return await c.until_ready()

    await c.send(Parse(name="s", sql="SELECT 7"), Sync())
    await c.until_ready()
    for _ in range(3):
        got = await ask()
        assert got == [
            BindComplete(),
            DataRow(values=(b"7",)),
            CommandComplete(tag="SELECT 1"),
            ReadyForQuery(status="I"),
        ]
    await c.send(Query(sql="BEGIN"))
    await c.until_ready()
    for _ in range(2):
        got = await ask()
        assert got[1] == DataRow(values=(b"7",))
        assert got[-1] == ReadyForQuery(status="T")
    await c.send(Query(sql="SELECT 1/0"))
    await c.until_ready()
    got = await ask()  # a failed transaction: the backend refuses the Bind
    assert isinstance(got[0], ErrorResponse)
    assert got[-1] == ReadyForQuery(status="E")
    await c.send(Query(sql="ROLLBACK"))
    await c.until_ready()
    await c.send(
        Close(kind="S", name="s"),
        Parse(name="s", sql="SELECT count(*) FROM adult WHERE age > 5"),
        Sync(),
    )
    await c.until_ready()
    for _ in range(2):
        got = await ask()
        assert DataRow(values=(b"1005",)) in got
        assert got[-1] == ReadyForQuery(status="I")
    await c.close()


async def test_remembered_exchanges_leave_the_state_of_a_full_handling(proxy: Proxy) -> None:
    """Repeated exchanges are relayed from the session's memory of them (client reads in
    ``_relay_known``, backend reads in ``_on_backend_read``: proxy.wire.replay); after each
    ReadyForQuery the session must be where handling every message would have left it:
    nothing owed, no ReadyForQuery outstanding, no batch open, the backend's transaction
    status."""
    c = await RawClient.login(proxy.host, proxy.port, proxy.user, proxy.password, proxy.database)
    assert c.key is not None
    session = proxy.server.server._sessions[c.key.pid]  # the proxy's side of this client

    def assert_settled(status: str) -> None:
        assert not session.relay.pending
        assert session.conn.pending_ready == 0
        assert not session.conn.batch_open
        assert not session.relay.upstream_open
        assert session.conn.txn_status == status
        assert session.conn.state is _STATE[status]

    await c.send(Parse(name="s", sql="SELECT 7"), Sync())
    await c.until_ready()
    for status in ("I", "I", "I", "T", "T", "T"):
        if status == "T" and session.conn.txn_status == "I":
            await c.send(Query(sql="BEGIN"))
            await c.until_ready()
        await c.send_together(Bind(statement="s"), Execute(), Sync())
        got = await c.until_ready()
        assert got[1:] == [
            DataRow(values=(b"7",)),
            CommandComplete(tag="SELECT 1"),
            ReadyForQuery(status=status),  # type: ignore[arg-type]
        ]
        assert_settled(status)
    assert session.memory.reads and session.memory.replies  # the memory was used
    for _ in range(3):  # replies to the simple protocol too
        await c.send(Query(sql="SELECT 8"))
        assert DataRow(values=(b"8",)) in await c.until_ready()
        assert_settled("T")
    assert any(key[0] == (Kind.QUERY,) for key in session.memory.replies)
    await c.send(Parse(name="commit", sql="COMMIT"), Parse(name="begin", sql="BEGIN"), Sync())
    await c.until_ready()
    for _ in range(3):  # the same replies to COMMIT and BEGIN each time
        await c.send_together(Bind(statement="commit"), Execute(), Sync())
        await c.until_ready()
        assert_settled("I")
        await c.send_together(Bind(statement="begin"), Execute(), Sync())
        await c.until_ready()
        assert_settled("T")
    await c.send(Query(sql="ROLLBACK"))
    await c.until_ready()
    assert_settled("I")
    await c.close()


async def test_remembered_exchange_keeps_its_place_before_a_local_answer(proxy: Proxy) -> None:
    """A remembered Bind/Execute/Sync still owes its replies: a local answer asked for
    while they are on their way waits for them and comes after them, and a pipeline of two
    remembered batches in one read is answered in order."""
    c = await RawClient.login(proxy.host, proxy.port, proxy.user, proxy.password, proxy.database)
    assert c.key is not None
    session = proxy.server.server._sessions[c.key.pid]
    slow = (Bind(statement="slow"), Execute(), Sync())
    slow_replies = [
        BindComplete(),
        DataRow(values=(b"",)),
        CommandComplete(tag="SELECT 1"),
        ReadyForQuery(status="I"),
    ]
    await c.send(
        Parse(name="slow", sql="SELECT pg_sleep(0.2)::text"),
        Parse(name="local", sql="SELECT count(*) FROM adult WHERE age > 5"),
        Sync(),
    )
    await c.until_ready()
    for _ in range(2):  # the second time from memory
        await c.send_together(*slow)
        assert await c.until_ready() == slow_replies
    for local in (
        (Bind(statement="local"), Execute(), Sync()),  # waits for the backend to answer
        (Query(sql="SELECT count(*) FROM adult WHERE age > 5"),),
    ):
        await c.send_together(*slow)  # from memory; the backend takes 0.2 s
        await asyncio.sleep(0.05)  # a read of its own
        assert len(session.relay.pending) == 3  # Bind, Execute and Sync are owed
        assert session.conn.pending_ready == 1
        await c.send_together(*local)
        assert await c.until_ready() == slow_replies
        got = await c.until_ready()
        assert DataRow(values=(b"1005",)) in got
    await c.send_together(*slow, *slow)
    got = await c.until_ready() + await c.until_ready()
    assert got == 2 * slow_replies
    await c.close()


# -- Malformed content: PostgreSQL's ERROR, never FATAL ---------------------------------------
#
# PostgreSQL reads a message's content field by field (pq_getmsg*) and answers what does not
# read with an ERROR -- 08P01 "insufficient data left in message", "invalid string in message",
# "invalid message format" -- or with the first check of the message that fails; only a bad
# type byte or length is FATAL. Each case goes raw to PostgreSQL and through the proxy, against
# a statement the proxy relays and one it answers itself, followed by the rest of a batch
# (skipped after an error), Sync and a Query; the replies must be the same, and the session
# must answer the Query. PostgreSQL's side of a statement answered here is the aggregator
# role's, which may read the table: its checks after the privilege check run too.


def _i16(*v: int) -> bytes:
    return struct.pack(f"!{len(v)}h", *v)


def _i32(v: int) -> bytes:
    return struct.pack("!i", v)


def _msg(t: bytes, body: bytes) -> bytes:
    return t + _i32(len(body) + 4) + body


def _bind(stmt: bytes, rest: bytes, portal: bytes = b"") -> bytes:
    return _msg(b"B", portal + b"\0" + stmt + b"\0" + rest)


_PARAM = _i16(1) + _i32(1) + b"5"  # one text parameter, '5'
_OK = _i16(0) + _PARAM + _i16(0)  # a valid Bind after the names
_CUT = _msg(b"E", b"\0" + _i32(0) + b"x")  # an Execute with a byte too many

# Messages naming the statement ``s`` (relayed, or answered here).
_ON_STATEMENT: dict[str, Callable[[bytes], bytes]] = {
    "Bind: parameter count, then the end": lambda s: _bind(s, _i16(0, 1)),
    "Bind: parameter length cut short": lambda s: _bind(s, _i16(0, 1) + b"\0\0"),
    "Bind: parameter value past the end": lambda s: _bind(s, _i16(0, 1) + _i32(100) + b"5"),
    "Bind: parameter length -2": lambda s: _bind(s, _i16(0, 1) + _i32(-2) + b"5" + _i16(0)),
    "Bind: two parameters for one": lambda s: _bind(s, _i16(0, 2) + _PARAM[2:] * 2 + _i16(0)),
    "Bind: no parameter for one": lambda s: _bind(s, _i16(0, 0, 0)),
    "Bind: parameter count -1 (65535)": lambda s: _bind(s, _i16(0, -1, 0)),
    "Bind: two parameter formats, one parameter": lambda s: _bind(
        s, _i16(2, 0, 0) + _PARAM + _i16(0)
    ),
    "Bind: parameter formats past the end": lambda s: _bind(s, _i16(3, 0)),
    "Bind: parameter format count -1": lambda s: _bind(s, _i16(-1, 0)),
    "Bind: parameter format code 2": lambda s: _bind(s, _i16(1, 2) + _PARAM + _i16(0)),
    "Bind: format code -1 for a NULL": lambda s: _bind(s, _i16(1, -1, 1) + _i32(-1) + _i16(0)),
    "Bind: binary int4 too short": lambda s: _bind(s, _i16(1, 1) + _PARAM + _i16(0)),
    "Bind: binary int4 too long": lambda s: _bind(s, _i16(1, 1, 1) + _i32(5) + b"\0" * 5 + _i16(0)),
    "Bind: text parameter not a number": lambda s: _bind(
        s, _i16(0, 1) + _i32(3) + b"abc" + _i16(0)
    ),
    "Bind: no result format count": lambda s: _bind(s, _i16(0) + _PARAM),
    "Bind: result formats past the end": lambda s: _bind(s, _i16(0) + _PARAM + _i16(2, 0)),
    "Bind: result format count -1": lambda s: _bind(s, _i16(0) + _PARAM + _i16(-1)),
    "Bind: two result formats, one column": lambda s: _bind(s, _i16(0) + _PARAM + _i16(2, 0, 0)),
    # Accepted at Bind, shown by Describe, refused at Execute (22023).
    "Bind: result format code 2": lambda s: (
        _bind(s, _i16(0) + _PARAM + _i16(1, 2)) + Describe(kind="P").encode()
    ),
    "Bind: result format code 2, trailing byte": lambda s: _bind(
        s, _i16(0) + _PARAM + _i16(1, 2) + b"x"
    ),
    "Bind: trailing byte": lambda s: _bind(s, _OK + b"\0"),
    "Bind: unknown statement, trailing bytes": lambda s: _bind(b"nosuch", _OK + b"zz"),
    "Bind: unterminated portal name": lambda s: _msg(b"B", b"abc"),
    "Bind: unterminated statement name": lambda s: _msg(b"B", b"\0" + s),
    "Bind: empty body": lambda s: _msg(b"B", b""),
    "Bind: statement name not UTF-8": lambda s: _msg(b"B", b"\0\xff\0" + _i16(0, 0, 0)),
    "Bind: a named portal again, trailing byte": lambda s: (
        _bind(s, _OK, b"p") + _bind(s, _OK + b"x", b"p")  # 42P03 comes first
    ),
    "Bind: two parameters for one, in a failed transaction": lambda s: _bind(
        s, _i16(0, 2) + _PARAM[2:] * 2 + _i16(0)
    ),  # 08P01: counts come first
    "Bind: trailing byte, in a failed transaction": lambda s: _bind(s, _OK + b"x"),  # 25P02
    "Describe: the statement, trailing byte": lambda s: _msg(b"D", b"S" + s + b"\0x"),
    "Close: the statement, trailing byte": lambda s: _msg(b"C", b"S" + s + b"\0x"),
    "Execute: its portal, trailing byte": lambda s: _bind(s, _OK) + _CUT,
    "Sync with a body, after a Bind": lambda s: _bind(s, _OK) + _msg(b"S", b"x"),
    "Flush with a body, after a Bind": lambda s: _bind(s, _OK) + _msg(b"H", b"x"),
}
_STATEMENTS = {
    "relayed": (b"r", "SELECT $1::int"),
    "answered here": (b"l", "SELECT count(*) FROM adult WHERE age > $1"),
}
# Messages naming no statement.
_ALONE: dict[str, bytes] = {
    "Parse: unterminated name": _msg(b"P", b"abc"),
    "Parse: unterminated query": _msg(b"P", b"\0SELECT 1"),
    "Parse: no parameter-type count": _msg(b"P", b"\0SELECT 1\0"),
    "Parse: parameter types past the end": _msg(b"P", b"\0SELECT 1\0" + _i16(2) + _i32(23)),
    "Parse: parameter-type count -1": _msg(b"P", b"\0SELECT 1\0" + _i16(-1)),
    "Parse: trailing byte": _msg(b"P", b"\0SELECT 1\0" + _i16(0) + b"x"),
    "Parse: query not UTF-8": _msg(b"P", b"\0SELECT '\xff'\0" + _i16(0)),
    "Parse: query with a cut UTF-8 sequence": _msg(b"P", b"\0SELECT 'a\xe2\x82'\0" + _i16(0)),
    "Parse: query with a UTF-16 surrogate": _msg(b"P", b"\0SELECT '\xed\xa0\x80'\0" + _i16(0)),
    "Parse: trailing byte, in a failed transaction": _msg(b"P", b"\0SELECT 1\0" + _i16(0) + b"x"),
    "Describe: empty body": _msg(b"D", b""),
    "Describe: subtype X": _msg(b"D", b"X\0"),
    "Describe: unterminated name": _msg(b"D", b"Sabc"),
    "Describe: trailing byte": _msg(b"D", b"S\0x"),
    "Execute: unterminated portal name": _msg(b"E", b"abc"),
    "Execute: row count cut short": _msg(b"E", b"\0\0\0"),
    "Execute: trailing byte": _CUT,
    "Close: empty body": _msg(b"C", b""),
    "Close: subtype X": _msg(b"C", b"X\0"),
    "Close: trailing byte": _msg(b"C", b"P\0x"),
    "Query: unterminated": _msg(b"Q", b"SELECT 1"),
    "Query: trailing byte": _msg(b"Q", b"SELECT 1\0x"),
    "Query: not UTF-8": _msg(b"Q", b"SELECT '\xc3\xa9\xe0\x41'\0"),
    "Query: trailing byte, in a failed transaction": _msg(b"Q", b"SELECT 1\0x"),
    "Sync with a body": _msg(b"S", b"x"),
    "Sync with a body, in a failed transaction": _msg(b"S", b"x"),
    "Flush with a body": _msg(b"H", b"x"),
    "CopyDone with a body, outside COPY": _msg(b"c", b"x"),  # ignored, as PostgreSQL does
    "CopyFail unterminated, outside COPY": _msg(b"f", b"x"),  # ignored, as PostgreSQL does
    "FunctionCall cut short": _msg(b"F", b"\0\0"),
}
# What is compared where the proxy answers in its own words (default: S, V, C and M): its
# 22P02 for a parameter it cannot decode has a generic message; it serves no FunctionCall
# (0A000), malformed or not.
_COMPARED = {
    ("Bind: text parameter not a number", "answered here"): "SVC",
    ("FunctionCall cut short", ""): "SV",
}
_MALFORMED = [(c, t) for c in _ON_STATEMENT for t in _STATEMENTS] + [(c, "") for c in _ALONE]
# After the message: the rest of a batch (skipped after an error), Sync, and a Query.
_REST = b"".join(x.encode() for x in (Execute(), Parse(sql="SELECT 2"), Bind(), Execute(), Sync()))
_END = Query(sql="SELECT 'end'").encode()


async def _malformed_replies(
    c: RawClient, setup: list[bytes], data: bytes, fields: str
) -> list[object]:
    for s in setup:
        c.conn.write(s)
        await c.conn.drain()
        await c.until_ready()
    c.conn.write(data)
    await c.conn.drain()
    got: list[object] = []
    while True:
        try:
            msg = await c.read(5)
        except (ConnectionError, TimeoutError) as e:
            return [*normalise(got, keep_error_fields=fields), f"connection lost ({e!r})"]
        got.append(msg)
        if isinstance(msg, ReadyForQuery) and DataRow(values=(b"end",)) in got:
            return normalise(got, keep_error_fields=fields)


@pytest.fixture
def oracle(pg):  # type: ignore[no-untyped-def]
    """PostgreSQL itself, as the passthrough role; for a statement the proxy answers, as the
    aggregator role, which may read the protected table."""

    def config(target: str) -> UpstreamConfig:
        dsn = pg.aggregator_dsn if target == "answered here" else pg.passthrough_dsn
        return UpstreamConfig.from_dsn(dsn)

    return config


@pytest.mark.parametrize(
    ("case", "target"), _MALFORMED, ids=[f"{c} [{t}]" if t else c for c, t in _MALFORMED]
)
async def test_malformed_message_answered_as_postgres(
    case: str, target: str, oracle: Callable[[str], UpstreamConfig], proxy: Proxy
) -> None:
    setup: list[bytes] = []
    end = _END
    if target:
        name, sql = _STATEMENTS[target]
        setup.append(Parse(name=name.decode(), sql=sql).encode() + Sync().encode())
        data = _ON_STATEMENT[case](name)
    else:
        data = _ALONE[case]
    if case.endswith("in a failed transaction"):
        setup.append(Query(sql="BEGIN; SELECT 1/0").encode())
        end = Query(sql="ROLLBACK").encode() + _END
    data += _REST + end
    fields = _COMPARED.get((case, target), "SVCM")
    direct = oracle(target)
    got = []
    for host, port, user, password, database in (
        (direct.host, direct.port, direct.user, direct.password, direct.database),
        (proxy.host, proxy.port, proxy.user, proxy.password, proxy.database),
    ):
        c = await RawClient.login(host, port, user, password, database)
        try:
            got.append(await _malformed_replies(c, setup, data, fields))
        finally:
            await c.close()
    want, through_proxy = got
    assert (
        any(isinstance(x, tuple) and x[0] == "ErrorResponse" for x in want)
        or "outside COPY" in case
    )
    assert through_proxy == want
    assert DataRow(values=(b"end",)) in through_proxy  # the session served the next Query
