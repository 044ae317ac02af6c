"""Admission of client logins (proxy.wire.admission): the login deadline, pending logins that
hold no session slot and are bounded apart, limits per user and per address, the backoff on
failed logins, and a mock SCRAM exchange that looks like a real one.

The clients are real sockets, most from several loopback addresses (127.0.0.0/8 is all
loopback on Linux, so a socket bound to 127.0.0.7 is another client address to the proxy).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import resource
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
import scramp
from conftest import PASSWORD, USER, TestRouter, make_config
from wireclient import decode_all, normalise

from proxy.config import parse_config
from proxy.wire import messages as m
from proxy.wire.auth import AuthConfig, scram_salt
from proxy.wire.server import BackgroundServer, ProxyServer, ServerConfig
from proxy.wire.upstream import UpstreamConfig, UpstreamConnection, UpstreamStartupError

OTHER, OTHER_PASSWORD = "bob", "bob-secret"
FLOOD = 1000


# -- helpers -----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(config: ServerConfig) -> AsyncIterator[ProxyServer]:
    """A proxy on the test's own event loop."""
    server = ProxyServer(config, TestRouter({"adult"}))
    await server.start()
    try:
        yield server
    finally:
        await server.shutdown(grace=1)


@contextlib.contextmanager
def background(pg, **overrides: object) -> Iterator[BackgroundServer]:  # type: ignore[no-untyped-def]
    """A proxy on its own thread, for synchronous clients."""
    config = make_config(pg, upstream_database=pg.database, **overrides)
    with BackgroundServer(config, TestRouter({"adult"})) as srv:
        yield srv


async def _open(
    port: int, src: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(src, 0))


def _startup(user: str, database: str) -> bytes:
    return m.StartupMessage(params=(("user", user), ("database", database))).encode()


async def _read_all(reader: asyncio.StreamReader, timeout: float = 10.0) -> bytes:
    """Everything until the server closes (ConnectionError counts as closing)."""
    out = b""
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), timeout):
            out += chunk
    return out


async def _login(
    port: int, user: str, password: str, database: str, src: str = "127.0.0.1"
) -> UpstreamConnection:
    """A whole login (SCRAM), from the client address ``src``."""
    r, w = await _open(port, src)
    cfg = UpstreamConfig(
        host="127.0.0.1", port=port, user=user, password=password, database=database
    )
    conn = UpstreamConnection(r, w, cfg)
    try:
        await asyncio.wait_for(conn._login((), database), 30)
    except BaseException:
        await conn.close()
        raise
    return conn


async def _refused(
    port: int, user: str, password: str, database: str, src: str = "127.0.0.1"
) -> tuple[m.ErrorResponse, float]:
    """The FATAL a login gets, and the seconds from connect to it."""
    t0 = time.monotonic()
    with pytest.raises(UpstreamStartupError) as ei:
        conn = await _login(port, user, password, database, src)
        await conn.close()
    return ei.value.error, time.monotonic() - t0


@dataclass
class Scram:
    """A SCRAM exchange driven step by step, to look at the server-first message and to
    send a proof without waiting for the answer."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    frames: m.FrameBuffer
    client: scramp.ScramClient
    server_first: str

    @classmethod
    async def start(
        cls, port: int, user: str, password: str, database: str, src: str = "127.0.0.1"
    ) -> Scram:
        r, w = await _open(port, src)
        w.write(_startup(user, database))
        frames = m.FrameBuffer()
        assert isinstance(await _next(r, frames), m.AuthenticationSASL)
        client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
        first = client.get_client_first().encode()
        w.write(m.PasswordMessage.sasl_initial_response("SCRAM-SHA-256", first).encode())
        cont = await _next(r, frames)
        assert isinstance(cont, m.AuthenticationSASLContinue)
        return cls(r, w, frames, client, cont.data.decode())

    @property
    def fields(self) -> dict[str, str]:
        """``r`` (nonce), ``s`` (salt, base64), ``i`` (iterations) of the server-first message."""
        return dict(part.split("=", 1) for part in self.server_first.split(","))

    async def send_proof(self) -> None:
        self.client.set_server_first(self.server_first)
        self.writer.write(m.PasswordMessage(data=self.client.get_client_final().encode()).encode())
        await self.writer.drain()

    async def rest(self) -> list[m.BackendMessage]:
        """Every message until the server closes."""
        out = []
        buffered = self.frames
        while (f := buffered.next_frame()) is not None:
            out.append(m.decode_backend(*f))
        return out + decode_all(await _read_all(self.reader))

    def close(self) -> None:
        self.writer.close()


async def _next(reader: asyncio.StreamReader, frames: m.FrameBuffer) -> m.BackendMessage:
    while (f := frames.next_frame()) is None:
        data = await asyncio.wait_for(reader.read(65536), 10)
        if not data:
            raise ConnectionError("the server closed the connection")
        frames.feed(data)
    return m.decode_backend(*f)


async def _until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for a server-side state change that follows a client's close."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the server did not catch up"
        await asyncio.sleep(0.02)


@contextlib.contextmanager
def open_files(need: int) -> Iterator[None]:
    """RLIMIT_NOFILE raised to ``need`` for the block (skip if the hard limit forbids it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"needs {need} open files; the hard limit is {hard}")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    except (ValueError, OSError) as e:
        pytest.skip(f"cannot raise the open-file limit to {need}: {e}")
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- pending logins hold no session slot -------------------------------------------------------


@pytest.mark.parametrize(
    "sources",
    [["127.0.0.1"], [f"127.0.0.{i}" for i in range(2, 52)]],
    ids=["from-the-clients-address", "from-fifty-addresses"],
)
def test_a_flood_of_silent_logins_does_not_lock_out_a_real_one(pg, sources: list[str]) -> None:  # type: ignore[no-untyped-def]
    """1,000 sockets that send a StartupMessage and never answer the challenge: a real
    psycopg login succeeds while they are all open, with max_connections far below their
    number, whether they share the real client's address or come from fifty others."""
    startup = _startup(USER, pg.database)
    with open_files(FLOOD + 500), background(pg, max_connections=3, login_timeout=60.0) as srv:
        socks: list[socket.socket] = []
        try:
            for i in range(FLOOD):
                s = socket.create_connection(
                    ("127.0.0.1", srv.port),
                    timeout=10,
                    source_address=(sources[i % len(sources)], 0),
                )
                s.sendall(startup)
                socks.append(s)
                if i % 100 == 99:  # its challenge: the proxy has seen this one and all before
                    assert s.recv(1) == b"R"

            async def counts() -> tuple[int, int, int]:
                per = max(srv.server.pending_from(a) for a in sources)
                return srv.server.pending_count, per, srv.server.session_count

            pending, per_address, sessions = srv.call(counts())
            # 20 per address that gave their user name, 20 that have not yet
            assert pending <= 100 and per_address <= 40 and sessions == 0
            dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
            with psycopg.connect(dsn, connect_timeout=10) as c:
                assert c.execute("SELECT 1").fetchone() == (1,)
                assert srv.call(counts())[2] == 1
            # The oldest was closed to make room, with a FATAL that says why.
            socks[0].settimeout(10)
            data = b""
            while chunk := socks[0].recv(65536):
                data += chunk
            got = decode_all(data)[-1]  # after its challenge, if it was answered before
            assert isinstance(got, m.ErrorResponse) and got.sqlstate == "53300"
            assert got.field("S") == "FATAL"
        finally:
            for s in socks:
                s.close()


# -- the login deadline -----------------------------------------------------------------------


async def test_unauthenticated_sockets_are_closed_at_the_login_deadline(pg) -> None:  # type: ignore[no-untyped-def]
    """Silent before the StartupMessage, silent after the challenge, or trickling a byte at a
    time: each is closed at ``login_timeout`` after connecting -- one deadline, not one per
    read -- and, as PostgreSQL at authentication_timeout, without a message."""
    startup = _startup(USER, pg.database)
    async with serving(make_config(pg, login_timeout=0.5)) as server:

        async def closed_after(
            send: Callable[[asyncio.StreamWriter], object],
        ) -> tuple[bytes, float]:
            r, w = await _open(server.port)
            t0 = time.monotonic()
            task = asyncio.ensure_future(send(w))
            try:
                data = await _read_all(r)
                return data, time.monotonic() - t0
            finally:
                task.cancel()
                w.close()

        async def nothing(w: asyncio.StreamWriter) -> None:
            pass

        async def startup_only(w: asyncio.StreamWriter) -> None:
            w.write(startup)

        sent = 0

        async def trickle(w: asyncio.StreamWriter) -> None:
            nonlocal sent
            for b in startup:  # 0.1 s a byte: the whole message would take seconds
                w.write(bytes([b]))
                sent += 1
                await asyncio.sleep(0.1)

        data, t = await closed_after(nothing)
        assert data == b"" and 0.4 <= t < 3.0
        data, t = await closed_after(startup_only)
        assert decode_all(data) == [m.AuthenticationSASL(mechanisms=("SCRAM-SHA-256",))]
        assert 0.4 <= t < 3.0
        data, t = await closed_after(trickle)
        assert data == b"" and 0.4 <= t < 3.0
        assert sent < len(startup)  # closed while the client was still sending
        await _until(lambda: server.pending_count == 0)


# -- limits on sessions --------------------------------------------------------------------------


async def _postgres_role_limit_refusal(pg) -> list[object]:  # type: ignore[no-untyped-def]
    """PostgreSQL's own answer to a login over a role's CONNECTION LIMIT, from the client's
    proof on, normalised, with the role's name written as USER's."""
    role, password = f"lapras_limit_{secrets.token_hex(4)}", secrets.token_hex(8)
    admin = await psycopg.AsyncConnection.connect(pg.admin_dsn, autocommit=True)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1 PASSWORD '{password}'")
        await admin.execute(f"GRANT CONNECT ON DATABASE {pg.database} TO {role}")
        first = await _login(pg.port, role, password, pg.database)
        try:
            x = await Scram.start(pg.port, role, password, pg.database)
            await x.send_proof()
            got = await x.rest()
            x.close()
        finally:
            await first.close()
        return _shape(got, role, USER)
    finally:
        await admin.execute(f"REVOKE CONNECT ON DATABASE {pg.database} FROM {role}")
        await admin.execute(f"DROP ROLE {role}")
        await admin.close()


def _shape(msgs: list[m.BackendMessage], name: str = "", as_name: str = "") -> list[object]:
    """Message types, and the severity, code and message of errors, with the role ``name``
    written ``as_name`` (SASLFinal's data and source-location fields differ by server)."""
    out: list[object] = []
    for x in msgs:
        if isinstance(x, m.ErrorResponse):
            fields = [(c, v.replace(name, as_name) if name else v) for c, v in x.fields]
            out.append(
                normalise([m.ErrorResponse(fields=tuple(fields))], keep_error_fields="SVCM")[0]
            )
        else:
            out.append(type(x).__name__)
    return out


async def test_per_user_limit_is_postgres_role_limit(pg) -> None:  # type: ignore[no-untyped-def]
    """max_user_connections = 1: a user's second session gets what PostgreSQL sends for a
    role over its CONNECTION LIMIT (AuthenticationOk, then FATAL 53300 "too many connections
    for role"), other users are not counted with it, and the slot is free once it ends."""
    want = await _postgres_role_limit_refusal(pg)
    auth = AuthConfig.with_passwords({USER: PASSWORD, OTHER: OTHER_PASSWORD})
    config = make_config(pg, auth=auth, max_user_connections=1, upstream_database=pg.database)
    async with serving(config) as server:
        first = await _login(server.port, USER, PASSWORD, pg.database)
        x = await Scram.start(server.port, USER, PASSWORD, pg.database)
        await x.send_proof()
        got = _shape(await x.rest())
        x.close()
        assert got == want
        assert got[-1] == (
            "ErrorResponse",
            (("S", "FATAL"), ("V", "FATAL"), ("C", "53300"),
             ("M", f'too many connections for role "{USER}"')),
        )  # fmt: skip
        other = await _login(server.port, OTHER, OTHER_PASSWORD, pg.database)
        await first.close()
        await _until(lambda: server.session_count == 1)
        again = await _login(server.port, USER, PASSWORD, pg.database)
        assert server.session_count == 2 and server.pending_count == 0
        await again.close()
        await other.close()


async def test_per_address_limit(pg) -> None:  # type: ignore[no-untyped-def]
    """max_address_connections = 1: a second session from one address gets FATAL 53300,
    another address is not counted with it, and the slot is free once the session ends."""
    async with serving(make_config(pg, max_address_connections=1)) as server:
        first = await _login(server.port, USER, PASSWORD, pg.database)
        err, _ = await _refused(server.port, USER, PASSWORD, pg.database)
        assert err.sqlstate == "53300" and err.field("S") == "FATAL"
        assert err.field("M") == 'too many connections from address "127.0.0.1"'
        elsewhere = await _login(server.port, USER, PASSWORD, pg.database, src="127.0.0.2")
        await first.close()
        await _until(lambda: server.session_count == 1)
        again = await _login(server.port, USER, PASSWORD, pg.database)
        assert server.session_count == 2 and server.pending_count == 0
        await again.close()
        await elsewhere.close()


def test_connection_limit_counts_sessions_not_logins(pg) -> None:  # type: ignore[no-untyped-def]
    """max_connections = 1: an unauthenticated socket does not take the one slot, a second
    session is refused with PostgreSQL's "sorry, too many clients already"."""
    with background(pg, max_connections=1) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(_startup(USER, pg.database))
        assert s.recv(1) == b"R"
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with psycopg.connect(dsn) as c:
            with pytest.raises(psycopg.OperationalError, match="sorry, too many clients already"):
                psycopg.connect(dsn)
            assert c.execute("SELECT 1").fetchone() == (1,)
        s.close()


# -- backoff on failed logins -------------------------------------------------------------------


async def test_failed_logins_slow_down_failures_only(pg) -> None:  # type: ignore[no-untyped-def]
    """Wrong passwords of one user name from one address are answered ever later (0.1, 0.2,
    0.4, 0.8 s ... up to auth_failure_delay); while a quarter of
    max_pending_logins_per_address of them wait out their delay, that name's next login
    from that address is refused at once (53300), and nothing else is: the failures hold no
    pending slot, another user name from the same address and the same name from another
    address log in (or fail) without delay, and a success forgets its own name's failures."""
    auth = AuthConfig.with_passwords({USER: PASSWORD, OTHER: OTHER_PASSWORD})
    config = make_config(
        pg, auth=auth, auth_failure_delay=2.0, max_pending_logins_per_address=8,
        upstream_database=pg.database,
    )  # fmt: skip
    async with serving(config) as server:
        port, db = server.port, pg.database
        for k in range(4):
            err, t = await _refused(port, USER, "wrong", db)
            assert err.sqlstate == "28P01"
            assert t >= 0.1 * 2**k * 0.95
        # USER's next failure from 127.0.0.1 waits 1.6 s; elsewhere, or another name, 0.1 s.
        err, t = await _refused(port, USER, "wrong", db, src="127.0.0.2")
        assert err.sqlstate == "28P01" and t < 1.5
        err, t = await _refused(port, OTHER, "wrong", db)
        assert err.sqlstate == "28P01" and t < 1.5

        guesses = [await Scram.start(port, USER, "wrong", db) for _ in range(2)]
        for g in guesses:
            await g.send_proof()
        sent = time.monotonic()
        await asyncio.sleep(0.5)  # the proxy has checked both proofs by now
        assert server.pending_from("127.0.0.1") == 0  # their delay holds no pending slot
        r, w = await _open(port)
        w.write(_startup(USER, db))
        refused = decode_all(await _read_all(r))
        w.close()
        assert isinstance(refused[0], m.ErrorResponse) and refused[0].sqlstate == "53300"
        assert refused[0].field("S") == "FATAL"
        assert refused[0].field("M") == (
            f'too many failed logins for user "{USER}" from address "127.0.0.1"'
        )
        neighbour = await _login(port, OTHER, OTHER_PASSWORD, db)  # same address, other name
        elsewhere = await _login(port, USER, PASSWORD, db, src="127.0.0.2")
        await neighbour.close()
        await elsewhere.close()
        for g in guesses:
            answer = await g.rest()
            assert isinstance(answer[0], m.ErrorResponse) and answer[0].sqlstate == "28P01"
            g.close()
        assert time.monotonic() - sent >= 1.5  # 1.6 s, then the cap of 2 s

        t0 = time.monotonic()
        ok = await _login(port, USER, PASSWORD, db)
        assert time.monotonic() - t0 < 1.6  # a failure now would wait the cap, 2 s
        await ok.close()
        err, t = await _refused(port, USER, "wrong", db)
        assert err.sqlstate == "28P01" and 0.09 <= t < 1.5  # counted afresh: 0.1 s


async def _guess(port: int, user: str, db: str, outcomes: list[str]) -> None:
    """One guess as a fast attacker makes it: a wrong proof, then no wait for the answer
    beyond the moment a success would have come."""
    try:
        x = await Scram.start(port, user, "wrong", db)
    except ConnectionError:
        outcomes.append("closed")
        return
    except AssertionError:  # the FATAL came instead of the SASL request
        outcomes.append("refused")
        return
    try:
        await x.send_proof()
        await asyncio.sleep(0.05)
        outcomes.append("guessed")
    finally:
        x.close()


async def test_a_wrong_password_flood_does_not_lock_out_its_address(pg) -> None:  # type: ignore[no-untyped-def]
    """Thirty clients on one address guess passwords as fast as the proxy lets them, at a
    real user's name and at names nobody has, with the default settings: a client behind the
    same address (a NAT, a BI server) logging in with the right password gets in while the
    flood goes on, and the flood is held to its bound (its logins refused at the start)."""
    auth = AuthConfig.with_passwords({USER: PASSWORD, OTHER: OTHER_PASSWORD})
    config = make_config(pg, auth=auth, upstream_database=pg.database)
    async with serving(config) as server:
        port, db = server.port, pg.database
        outcomes: list[str] = []
        stop = asyncio.Event()

        async def attacker(i: int) -> None:
            while not stop.is_set():
                name = OTHER if i % 2 else f"nobody-{i}-{len(outcomes) % 7}"
                await _guess(port, name, db, outcomes)

        flood = [asyncio.create_task(attacker(i)) for i in range(30)]
        try:
            await asyncio.sleep(2.0)  # the flood is at its bound by now
            for _ in range(3):
                # bound generous on a busy 2-core machine; the point is that it gets in
                conn = await asyncio.wait_for(_login(port, USER, PASSWORD, db), 15)
                await conn.close()
        finally:
            stop.set()
            await asyncio.gather(*flood, return_exceptions=True)
        assert outcomes.count("guessed") > 0 and outcomes.count("refused") > 0, (
            outcomes.count("guessed"),
            outcomes.count("refused"),
        )


# -- a user's share of the sessions ----------------------------------------------------------------


async def test_one_user_opening_sessions_in_a_loop_cannot_keep_another_out(pg) -> None:  # type: ignore[no-untyped-def]
    """With the default settings one user opening sessions in a loop is stopped at its share
    (half of max_connections, with two users declared) with PostgreSQL's "too many
    connections for role", and the other user still logs in; so does the first once one of
    its sessions ends."""
    auth = AuthConfig.with_passwords({USER: PASSWORD, OTHER: OTHER_PASSWORD})
    config = make_config(pg, auth=auth, max_connections=12, upstream_database=pg.database)
    async with serving(config) as server:
        port, db = server.port, pg.database
        held: list[UpstreamConnection] = []
        try:
            while True:
                try:
                    held.append(await _login(port, USER, PASSWORD, db))
                except UpstreamStartupError as e:
                    assert e.error.sqlstate == "53300"
                    assert e.error.field("M") == f'too many connections for role "{USER}"'
                    break
                assert len(held) <= 12
            assert len(held) == 6  # 12 // 2
            other = await _login(port, OTHER, OTHER_PASSWORD, db)
            await other.close()
            await held.pop().close()
            await _until(lambda: server.session_count == 5)
            held.append(await _login(port, USER, PASSWORD, db))
        finally:
            for c in held:
                await c.close()


async def test_the_last_slots_are_kept_for_users_without_a_session(pg) -> None:  # type: ignore[no-untyped-def]
    """max_connections = 5, max_user_connections = 3, reserved_connections = 1: two users
    holding four sessions between them leave the fifth slot to a user that has none."""
    third, third_password = "carol", "carol-secret"
    auth = AuthConfig.with_passwords({USER: PASSWORD, OTHER: OTHER_PASSWORD, third: third_password})
    config = make_config(
        pg, auth=auth, max_connections=5, max_user_connections=3, reserved_connections=1,
        upstream_database=pg.database,
    )  # fmt: skip
    async with serving(config) as server:
        port, db = server.port, pg.database
        held = [await _login(port, USER, PASSWORD, db) for _ in range(3)]
        try:
            held.append(await _login(port, OTHER, OTHER_PASSWORD, db))
            err, _ = await _refused(port, OTHER, OTHER_PASSWORD, db)
            assert err.sqlstate == "53300" and err.field("M") == (
                "remaining connection slots are reserved for users without a session"
            )
            held.append(await _login(port, third, third_password, db))
            err, _ = await _refused(port, third, third_password, db)
            assert err.field("M") == "sorry, too many clients already"
            assert server.session_count == 5
        finally:
            for c in held:
                await c.close()


# -- the mock SCRAM exchange ---------------------------------------------------------------------


async def _salts(
    config: ServerConfig, users: tuple[str, ...], db: str
) -> dict[str, list[dict[str, str]]]:
    """The server-first fields each user gets on two attempts."""
    out: dict[str, list[dict[str, str]]] = {}
    async with serving(config) as server:
        for u in users:
            for _ in range(2):
                x = await Scram.start(server.port, u, "whatever", db)
                out.setdefault(u, []).append(x.fields)
                x.close()
    return out


@pytest.mark.parametrize("method", ["scram-sha-256", "md5", "password"])
def test_a_user_name_matches_exactly(pg, method: str) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL's rule: the start-up packet's user name is the user's name, byte for byte. A
    trailing or leading space, a tab or another case is another (unknown) user, refused with
    the wrong-password error, whatever the method, with psycopg (libpq) and asyncpg alike."""
    from proxy.wire.auth import AuthMethod

    auth = AuthConfig.with_passwords({USER: PASSWORD}, AuthMethod(method))
    with background(pg, auth=auth, auth_failure_delay=0) as srv:
        kw = {"host": "127.0.0.1", "port": srv.port, "password": PASSWORD, "dbname": pg.database}
        with psycopg.connect(user=USER, **kw) as c:  # type: ignore[arg-type]
            assert c.execute("SELECT 1").fetchone() == (1,)
        for name in (f"{USER} ", f" {USER}", f"{USER}\t", USER.upper()):
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(user=name, **kw)  # type: ignore[arg-type]

            async def by_asyncpg(name: str = name) -> None:
                import asyncpg

                with pytest.raises(asyncpg.InvalidPasswordError):
                    await asyncpg.connect(
                        host="127.0.0.1", port=srv.port, user=name, password=PASSWORD,
                        database=pg.database, ssl=False,
                    )  # fmt: skip

            asyncio.run(by_asyncpg())


async def test_unknown_users_get_a_salt_like_a_real_users(pg) -> None:  # type: ignore[no-untyped-def]
    """An unknown user's SCRAM salt is the same on every attempt, in every process with the
    same secret (another worker, a restart), 16 bytes and 4096 iterations like a real user's
    and like PostgreSQL's own, and different per user name; its exchange fails only at the
    proof, with the wrong-password error."""
    secret = secrets.token_bytes(32)
    users = (USER, "nobody", "nobody-else")

    def config(key: bytes) -> ServerConfig:
        auth = AuthConfig.with_passwords({USER: PASSWORD}, secret=key)
        return make_config(pg, auth=auth, upstream_database=pg.database)

    first = await _salts(config(secret), users, pg.database)
    again = await _salts(config(secret), users, pg.database)
    rekeyed = await _salts(config(secrets.token_bytes(32)), users, pg.database)
    postgres = await _salts_from_postgres(pg)
    for u in users:
        a, b = first[u]
        assert a["s"] == b["s"] == again[u][0]["s"] != rekeyed[u][0]["s"]
        assert a["r"] != b["r"]  # the nonce is fresh each time
        assert a.keys() == postgres.keys() == {"r", "s", "i"}
        assert a["i"] == postgres["i"] == "4096"
        assert len(base64.b64decode(a["s"])) == len(base64.b64decode(postgres["s"])) == 16
        assert len(a["r"]) == len(first[USER][0]["r"])
    assert first[USER][0]["s"] == base64.b64encode(scram_salt(secret, USER)).decode()
    assert len({first[u][0]["s"] for u in users}) == len(users)

    async with serving(config(secret)) as server:
        for user, password in ((USER, "wrong"), ("nobody", PASSWORD)):
            x = await Scram.start(server.port, user, password, pg.database)
            await x.send_proof()
            got = await x.rest()
            x.close()
            assert isinstance(got[0], m.ErrorResponse) and got[0].sqlstate == "28P01"
            assert got[0].field("M") == f'password authentication failed for user "{user}"'


async def _salts_from_postgres(pg) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The server-first fields PostgreSQL itself sends to an unknown user."""
    x = await Scram.start(pg.port, "lapras_no_such_role", "whatever", pg.database)
    x.close()
    return x.fields


# -- configuration -------------------------------------------------------------------------------

_TOML = """
[tables.t.columns]
a = "integer"
[tables.t.attributes.a]
kind = "integer"
min = 0
max = 9
[tables.t.views]
v = ["a"]

[server]
listen = "127.0.0.1:6432"
{server}

[backend]
aggregator_dsn = "{aggregator}"
passthrough_dsn = "postgresql://pass:p@db/x"

[[users]]
name = "analyst"
password = "pw"
"""


def _config(server: str = "", aggregator: str = "postgresql://agg:a@db/x"):  # type: ignore[no-untyped-def]
    return parse_config(_TOML.format(server=server, aggregator=aggregator), "cfg.toml")


def test_admission_settings_in_lapras_toml() -> None:
    from rewriter.errors import ConfigError

    d = _config().server
    assert (d.login_timeout, d.max_pending_logins, d.max_pending_logins_per_address) == (
        5.0,
        100,
        20,
    )
    assert (d.max_user_connections, d.reserved_connections) == (None, None)  # share, tenth
    assert (d.max_address_connections, d.auth_failure_delay) == (0, 5.0)
    s = _config(
        "login_timeout = 2.5\nmax_pending_logins = 50\nmax_pending_logins_per_address = 5\n"
        "max_user_connections = 3\nmax_address_connections = 4\nauth_failure_delay = 0\n"
        "reserved_connections = 7"
    ).server
    assert s.reserved_connections == 7
    assert _config("max_user_connections = 0").server.max_user_connections == 0  # no limit
    assert (s.login_timeout, s.max_pending_logins, s.max_pending_logins_per_address) == (2.5, 50, 5)
    assert (s.max_user_connections, s.max_address_connections, s.auth_failure_delay) == (3, 4, 0.0)
    for line, key in (
        ("login_timeout = 0", "login_timeout"),
        ("max_pending_logins = 0", "max_pending_logins"),
        ("max_pending_logins_per_address = 0", "max_pending_logins_per_address"),
        ("max_user_connections = -1", "max_user_connections"),
        ("reserved_connections = 100", "reserved_connections"),
        ("reserved_connections = -1", "reserved_connections"),
        ("max_address_connections = true", "max_address_connections"),
        ("auth_failure_delay = -1", "auth_failure_delay"),
    ):
        with pytest.raises(ConfigError, match=f"cfg.toml: server.{key}: must"):
            _config(line)


def test_the_salt_secret_is_derived_from_the_configuration() -> None:
    """Every worker and every restart derives the same secret from the same file (so a user
    name's salt never changes), and another aggregator password gives another one."""
    from proxy.app import _auth, auth_secret

    a, b = _auth(_config()), _auth(_config())
    assert a.secret == b.secret == auth_secret(_config())
    v = a.users["analyst"].scram
    assert v is not None and v.salt == scram_salt(a.secret, "analyst")
    assert v == b.users["analyst"].scram
    assert auth_secret(_config(aggregator="postgresql://agg:other@db/x")) != a.secret
