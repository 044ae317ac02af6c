"""Start-up edge cases on raw sockets (diffed with PostgreSQL where sensible), authentication
methods, limits, timeouts, shutdown, malformed input and fuzzing."""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from conftest import PASSWORD, USER, TestRouter, make_config
from wireclient import RawClient, decode_all, normalise

from proxy.wire import messages as m
from proxy.wire.auth import AuthConfig, AuthMethod
from proxy.wire.server import BackgroundServer, ProxyServer
from proxy.wire.upstream import UpstreamConfig, UpstreamConnection, UpstreamStartupError


@contextlib.contextmanager
def extra_proxy(pg, **overrides: object) -> Iterator[BackgroundServer]:  # type: ignore[no-untyped-def]
    with BackgroundServer(make_config(pg, **overrides), TestRouter({"adult"})) as srv:
        yield srv


async def _open(
    port: int, host: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port)


async def _read_all(reader: asyncio.StreamReader, timeout: float = 10.0) -> bytes:
    out = b""
    with contextlib.suppress(ConnectionError):
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), timeout)
            if not chunk:
                break
            out += chunk
    return out


async def _login_after(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    port: int,
    database: str,
    params: tuple[tuple[str, str], ...] = (),
) -> UpstreamConnection:
    conn = UpstreamConnection(
        reader,
        writer,
        UpstreamConfig(
            host="127.0.0.1", port=port, user=USER, password=PASSWORD, database=database
        ),
    )
    await conn._login(params, None)
    return conn


# -- start-up ----------------------------------------------------------------------------------


async def test_ssl_and_gss_requests_answered_n(proxy) -> None:  # type: ignore[no-untyped-def]
    r, w = await _open(proxy.port)
    w.write(m.GSSENCRequest().encode())
    assert await r.readexactly(1) == b"N"
    w.write(m.SSLRequest().encode())
    assert await r.readexactly(1) == b"N"
    conn = await _login_after(r, w, proxy.port, proxy.database)
    key = conn.backend_key
    assert key is not None and key.pid > 0
    await conn.close()


async def test_plaintext_after_ssl_request_disconnects(proxy) -> None:  # type: ignore[no-untyped-def]
    r, w = await _open(proxy.port)
    w.write(m.SSLRequest().encode() + m.StartupMessage(params=(("user", USER),)).encode())
    assert await _read_all(r) == b""
    w.close()


async def test_second_ssl_request_is_fatal(proxy) -> None:  # type: ignore[no-untyped-def]
    r, w = await _open(proxy.port)
    w.write(m.SSLRequest().encode())
    assert await r.readexactly(1) == b"N"
    w.write(m.SSLRequest().encode())
    msgs = decode_all(await _read_all(r))
    assert isinstance(msgs[0], m.ErrorResponse) and msgs[0].sqlstate == "08P01"
    w.close()


async def _startup_reply(
    port: int, startup: m.StartupMessage, n: int = 1
) -> list[m.BackendMessage]:
    r, w = await _open(port)
    w.write(startup.encode())
    data = b""
    while len(decode_all(data)) < n:
        chunk = await asyncio.wait_for(r.read(65536), 10)
        if not chunk:
            break
        data += chunk
    w.close()
    return decode_all(data)[:n]


@pytest.mark.parametrize(
    "startup",
    [
        m.StartupMessage(protocol=(3 << 16) | 2, params=(("user", USER),)),
        m.StartupMessage(protocol=(3 << 16) | 9999, params=(("user", USER),)),
        m.StartupMessage(params=(("user", USER), ("_pq_.test_option", "1"))),
        m.StartupMessage(protocol=4 << 16, params=(("user", USER),)),
    ],
    ids=["3.2", "3.9999", "_pq_", "4.0"],
)
async def test_protocol_negotiation_like_postgres(startup: m.StartupMessage, proxy, pg) -> None:  # type: ignore[no-untyped-def]
    via = await _startup_reply(proxy.port, startup)
    direct = await _startup_reply(pg.port, startup)
    assert normalise(via, keep_error_fields="SVCM") == normalise(direct, keep_error_fields="SVCM")
    assert isinstance(via[0], m.NegotiateProtocolVersion | m.ErrorResponse)


async def test_negotiation_then_login_succeeds(proxy) -> None:  # type: ignore[no-untyped-def]
    c = await RawClient.login(
        proxy.host, proxy.port, USER, PASSWORD, proxy.database, params=(("_pq_.x", "1"),)
    )
    await c.send(m.Query(sql="SELECT 1"))
    assert m.DataRow(values=(b"1",)) in await c.until_ready()
    await c.close()


async def test_replication_refused(proxy) -> None:  # type: ignore[no-untyped-def]
    msgs = await _startup_reply(
        proxy.port, m.StartupMessage(params=(("user", USER), ("replication", "database")))
    )
    assert isinstance(msgs[0], m.ErrorResponse) and msgs[0].sqlstate == "0A000"
    assert msgs[0].field("S") == "FATAL"


async def test_parameter_status_replayed_from_upstream(proxy, pg) -> None:  # type: ignore[no-untyped-def]
    cfg = UpstreamConfig.from_dsn(pg.passthrough_dsn)
    d = await RawClient.login(cfg.host, cfg.port, cfg.user, cfg.password, cfg.database)
    c = await RawClient.login(proxy.host, proxy.port, USER, PASSWORD, proxy.database)
    assert c.parameters == d.parameters
    assert {"server_version", "client_encoding", "DateStyle", "integer_datetimes"} <= set(
        c.parameters
    )
    assert c.key is not None and 0 < c.key.pid < 2**31
    assert len(c.key.encode()) == 13
    await c.send(m.Query(sql="SET application_name = 'changed'"))
    got = await c.until_ready()
    assert m.ParameterStatus(name="application_name", value="changed") in got
    await c.close()
    await d.close()


async def test_startup_errors_from_upstream(pg) -> None:  # type: ignore[no-untyped-def]
    with extra_proxy(pg) as srv:
        with pytest.raises(UpstreamStartupError) as ei:
            await RawClient.login("127.0.0.1", srv.port, USER, PASSWORD, "nosuchdb")
        assert ei.value.error.sqlstate == "3D000"
        with pytest.raises(UpstreamStartupError) as ei:
            await RawClient.login(
                "127.0.0.1", srv.port, USER, PASSWORD, pg.database, params=(("foo_bar", "1"),)
            )
        assert ei.value.error.sqlstate == "42704"


# -- authentication ----------------------------------------------------------------------------


async def test_bad_password_and_unknown_user(proxy) -> None:  # type: ignore[no-untyped-def]
    for user, pw in ((USER, "wrong"), ("nobody", "x")):
        with pytest.raises(UpstreamStartupError) as ei:
            await RawClient.login(proxy.host, proxy.port, user, pw, proxy.database)
        assert ei.value.error.sqlstate == "28P01"
        assert ei.value.error.field("S") == "FATAL"


@pytest.mark.parametrize("method", [AuthMethod.MD5, AuthMethod.PASSWORD, AuthMethod.TRUST])
def test_other_auth_methods(pg, method: AuthMethod) -> None:  # type: ignore[no-untyped-def]
    auth = AuthConfig.with_passwords({USER: PASSWORD}, method=method)
    with extra_proxy(pg, auth=auth, upstream_database=pg.database) as srv:
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with psycopg.connect(dsn) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        if method is not AuthMethod.TRUST:
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(dsn.replace(PASSWORD, "bad"))


def test_trust_refused_from_non_loopback() -> None:
    from proxy.errors import InvalidAuthorization
    from proxy.wire.auth import Authenticator

    auth = AuthConfig.with_passwords({USER: PASSWORD}, method=AuthMethod.TRUST)
    with pytest.raises(InvalidAuthorization):
        Authenticator(auth, USER, peer_is_loopback=False).start()
    assert Authenticator(auth, USER, peer_is_loopback=True).start() == []


# -- limits, timeouts, shutdown ------------------------------------------------------------------


def test_connection_limit(pg) -> None:  # type: ignore[no-untyped-def]
    with extra_proxy(pg, max_connections=2, upstream_database=pg.database) as srv:
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with psycopg.connect(dsn), psycopg.connect(dsn):
            with pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(dsn)
        with psycopg.connect(dsn) as c:  # slots are freed on close
            assert c.execute("SELECT 1").fetchone() == (1,)


def test_idle_timeouts(pg) -> None:  # type: ignore[no-untyped-def]
    with extra_proxy(
        pg,
        idle_session_timeout=0.3,
        idle_in_transaction_timeout=0.3,
        upstream_database=pg.database,
    ) as srv:
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with psycopg.connect(dsn, autocommit=True) as c:
            asyncio.run(asyncio.sleep(1.0))
            with pytest.raises(psycopg.OperationalError) as ei:
                c.execute("SELECT 1")
            assert "idle-session timeout" in str(ei.value)
        with psycopg.connect(dsn) as c:
            c.execute("SELECT 1")  # opens a transaction
            asyncio.run(asyncio.sleep(1.0))
            with pytest.raises(psycopg.Error) as ei:
                c.execute("SELECT 1")
            assert "idle-in-transaction" in str(ei.value)


def test_statement_timeout_for_local_answers(pg) -> None:  # type: ignore[no-untyped-def]
    with extra_proxy(pg, statement_timeout=0.5, upstream_database=pg.database) as srv:
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with psycopg.connect(dsn, autocommit=True) as c:
            with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
                c.execute("SELECT count(*) FROM adult WHERE age > 999")
            with pytest.raises(psycopg.errors.QueryCanceled):
                c.execute("SELECT pg_sleep(5)")  # the backend got statement_timeout too
            assert c.execute("SELECT 1").fetchone() == (1,)


async def test_graceful_shutdown_sends_57p01(pg) -> None:  # type: ignore[no-untyped-def]
    server = ProxyServer(make_config(pg, upstream_database=pg.database), TestRouter({"adult"}))
    await server.start()
    idle = await RawClient.login("127.0.0.1", server.port, USER, PASSWORD, pg.database)
    busy = await RawClient.login("127.0.0.1", server.port, USER, PASSWORD, pg.database)
    await busy.send(m.Query(sql="SELECT pg_sleep(0.5)"))
    await asyncio.sleep(0.1)
    await server.shutdown(grace=5)
    got = await idle.read()
    assert isinstance(got, m.ErrorResponse) and got.sqlstate == "57P01"
    busy_msgs = []
    with contextlib.suppress(Exception):
        while True:
            busy_msgs.append(await busy.read(5))
    assert m.ReadyForQuery(status="I") in busy_msgs  # finished its statement first
    assert any(isinstance(x, m.ErrorResponse) and x.sqlstate == "57P01" for x in busy_msgs)
    assert server.session_count == 0
    await idle.close()
    await busy.close()


# -- malformed input and fuzzing ---------------------------------------------------------------


async def _logged_in_socket(proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:  # type: ignore[no-untyped-def]
    r, w = await _open(proxy.port)
    conn = await _login_after(r, w, proxy.port, proxy.database)
    return conn._reader, conn._writer


@pytest.mark.parametrize(
    "payload",
    [
        b"z\x00\x00\x00\x04",  # unknown type
        b"Q\x00\x00\x00\x02",  # length < 4
        b"Q\x7f\xff\xff\xff",  # oversized: refused without buffering 2 GB
        b"S\x00\x00\x40\x00",  # a Sync over PostgreSQL's small-message limit
        # (A malformed body is an ERROR that keeps the session, as in PostgreSQL:
        # test_raw_protocol.py, test_malformed_message_answered_as_postgres.)
    ],
)
async def test_malformed_message_closes_only_that_connection(payload: bytes, proxy) -> None:  # type: ignore[no-untyped-def]
    other = await RawClient.login(proxy.host, proxy.port, USER, PASSWORD, proxy.database)
    r, w = await _logged_in_socket(proxy)
    w.write(payload)
    msgs = decode_all(await _read_all(r))
    assert len(msgs) == 1 and isinstance(msgs[0], m.ErrorResponse)
    assert msgs[0].sqlstate == "08P01" and msgs[0].field("S") == "FATAL"
    w.close()
    await other.send(m.Query(sql="SELECT 1"))
    assert m.DataRow(values=(b"1",)) in await other.until_ready()
    await other.close()


async def test_router_bug_is_xx000_and_session_survives(proxy) -> None:  # type: ignore[no-untyped-def]
    c = await RawClient.login(proxy.host, proxy.port, USER, PASSWORD, proxy.database)
    await c.send(m.Query(sql="SELECT 'lapras-bug'"))
    got = await c.until_ready()
    assert isinstance(got[0], m.ErrorResponse) and got[0].sqlstate == "XX000"
    assert "lapras-bug" not in (got[0].field("M") or "")
    await c.send(m.Query(sql="SELECT 1"))
    assert m.DataRow(values=(b"1",)) in await c.until_ready()
    await c.send(m.FunctionCall(function_oid=1598))
    got = await c.until_ready()
    assert isinstance(got[0], m.ErrorResponse) and got[0].sqlstate == "0A000"
    await c.close()


_FUZZ_MESSAGES = [
    m.Query(sql="SELECT 1"),
    m.Query(sql="SELECT * FROM adult"),
    m.Query(sql="SELECT count(*) FROM adult WHERE age > 3"),
    m.Query(sql="BEGIN"),
    m.Query(sql="COMMIT"),
    m.Query(sql=""),
    m.Parse(sql="SELECT $1::int"),
    m.Parse(name="n", sql="SELECT count(*) FROM adult WHERE age > $1"),
    m.Parse(sql="SELECT * FROM adult"),
    m.Parse(sql="nonsense"),
    m.Bind(params=(b"1",)),
    m.Bind(statement="n", params=(b"2",)),
    m.Bind(statement="n", params=(b"\x00",), param_formats=(1,)),
    m.Bind(portal="p", statement="n", params=(b"5",)),
    m.Describe(kind="S", name="n"),
    m.Describe(kind="P"),
    m.Execute(),
    m.Execute(portal="p", max_rows=1),
    m.Close(kind="S", name="n"),
    m.Close(kind="P", name="p"),
    m.Sync(),
    m.Flush(),
    m.CopyData(data=b"x"),
    m.CopyDone(),
]


async def test_fuzz_message_sequences(proxy) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(1234)
    watcher = await RawClient.login(proxy.host, proxy.port, USER, PASSWORD, proxy.database)
    for _round in range(25):
        r, w = await _logged_in_socket(proxy)
        seq = [rng.choice(_FUZZ_MESSAGES) for _ in range(rng.randint(1, 25))]
        data = b"".join(x.encode() for x in seq)
        if rng.random() < 0.3:  # corrupt a byte or cut the stream
            data = bytearray(data)
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
            data = bytes(data)
        data += m.Sync().encode() + m.Query(sql="SELECT 'end'").encode()
        w.write(data)
        # The server answers or closes; it never hangs: the last reply is ours or a FATAL.
        got = b""
        while True:
            try:
                chunk = await asyncio.wait_for(r.read(65536), 10)
            except TimeoutError:
                pytest.fail(f"server hung on {seq!r}")
            if not chunk:
                break
            got += chunk
            try:
                msgs = decode_all(got)
            except Exception:
                continue
            if any(isinstance(x, m.DataRow) and x.values == (b"end",) for x in msgs):
                break
        w.close()
        await watcher.send(m.Query(sql="SELECT 2"))
        assert m.DataRow(values=(b"2",)) in await watcher.until_ready()
    await watcher.close()


async def test_random_bytes_after_login(proxy) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(99)
    for _ in range(20):
        r, w = await _logged_in_socket(proxy)
        w.write(bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))))
        w.write_eof()
        await asyncio.wait_for(_read_all(r), 10)  # closed, with or without 08P01
        w.close()
    c = await RawClient.login(proxy.host, proxy.port, USER, PASSWORD, proxy.database)
    await c.send(m.Query(sql="SELECT 1"))
    assert m.DataRow(values=(b"1",)) in await c.until_ready()
    await c.close()


async def test_random_bytes_before_startup(proxy) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(7)
    for _ in range(20):
        r, w = await _open(proxy.port)
        w.write(bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))))
        w.write_eof()
        await asyncio.wait_for(_read_all(r), 10)
        w.close()


async def test_cancel_with_wrong_key_is_ignored(proxy) -> None:  # type: ignore[no-untyped-def]
    c = await RawClient.login(proxy.host, proxy.port, USER, PASSWORD, proxy.database)
    assert c.key is not None
    await c.send(m.Query(sql="SELECT pg_sleep(0.3)"))
    r, w = await _open(proxy.port)
    w.write(m.CancelRequest(pid=c.key.pid, key=(c.key.key + 1) % 2**32).encode())
    assert await _read_all(r) == b""
    got = await c.until_ready()
    assert not any(isinstance(x, m.ErrorResponse) for x in got)
    await c.close()


_ = (AsyncIterator, struct)


# -- TLS -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory):  # type: ignore[no-untyped-def]
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not available to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=localhost", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    return ctx


def test_tls_when_a_certificate_is_configured(pg, tls_context) -> None:  # type: ignore[no-untyped-def]
    with extra_proxy(pg, ssl_context=tls_context, upstream_database=pg.database) as srv:
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with psycopg.connect(dsn + "?sslmode=require") as c:
            assert c.pgconn.ssl_in_use
            assert c.execute("SELECT count(*) FROM adult WHERE age > 1").fetchone() == (1001,)
        with psycopg.connect(dsn + "?sslmode=disable") as c:  # plaintext still accepted
            assert not c.pgconn.ssl_in_use


@pytest.mark.parametrize("pause", [0.0, 0.1], ids=["one-packet", "after-the-request"])
def test_plaintext_sent_after_an_ssl_request_is_never_read_as_a_login(
    pg, tls_context, pause: float, caplog
) -> None:  # type: ignore[no-untyped-def]
    """A StartupMessage sent in plain text behind an SSLRequest, without waiting for the
    answer, is not taken for one that came through TLS (CVE-2021-23222): in the same packet
    the proxy disconnects at once; in a later one the handshake reads it and fails. Either
    way no authentication request is sent, the connection ends, and the log says why
    without taking the client's failure for the proxy's (no internal error)."""
    import socket

    startup = m.StartupMessage(params=(("user", USER), ("database", pg.database))).encode()
    with extra_proxy(pg, ssl_context=tls_context, upstream_database=pg.database) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(m.SSLRequest().encode() + (startup if not pause else b""))
            if pause:
                assert s.recv(1) == b"S"
                s.sendall(startup)
            got = b""
            with contextlib.suppress(ConnectionError):
                while chunk := s.recv(65536):
                    got += chunk
        assert not got.lstrip(b"S").startswith(b"R")  # no AuthenticationRequest
        assert got in (b"", b"S") or got.lstrip(b"S")[:1] == b"\x15"  # or a TLS alert
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_slow_reader_holds_back_the_backend(proxy, pg) -> None:  # type: ignore[no-untyped-def]
    """A client that stops reading a large result stops the proxy reading the backend (the
    backend waits in ClientWrite) instead of the proxy buffering the whole result; the
    rows then arrive complete, and other sessions are served meanwhile."""
    c = await RawClient.login(proxy.host, proxy.port, proxy.user, proxy.password, proxy.database)
    app = "lapras-slow-reader"
    rows = 40_000
    try:
        await c.send(
            m.Query(sql=f"SET application_name = '{app}'"),
        )
        await c.until_ready()
        await c.send(m.Query(sql=f"SELECT repeat('x', 1000) FROM generate_series(1, {rows})"))
        waiting = None
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            for _ in range(100):
                await asyncio.sleep(0.05)
                waiting = admin.execute(
                    "SELECT state, wait_event FROM pg_stat_activity WHERE application_name = %s",
                    (app,),
                ).fetchone()
                if waiting == ("active", "ClientWrite"):
                    break
        assert waiting == ("active", "ClientWrite")
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            for _ in range(30):  # and stays there while the client does not read
                await asyncio.sleep(0.1)
                waiting = admin.execute(
                    "SELECT state, wait_event FROM pg_stat_activity WHERE application_name = %s",
                    (app,),
                ).fetchone()
                assert waiting == ("active", "ClientWrite")
        other = await RawClient.login(
            proxy.host, proxy.port, proxy.user, proxy.password, proxy.database
        )
        await other.send(m.Query(sql="SELECT 1"))
        assert any(isinstance(x, m.DataRow) for x in await other.until_ready())
        await other.close()
        got = await c.until_ready()
        assert sum(isinstance(x, m.DataRow) for x in got) == rows
        assert isinstance(got[-2], m.CommandComplete) and got[-2].tag == f"SELECT {rows}"
    finally:
        await c.close()
