"""Start-up and login of one client connection: the start-up packet, authentication, and
opening the session (admission to a slot, a backend connection from the session's pool, the
start-up's answer).

Start-up and login run in the session task, which waits for the client's reads (the
session's channel feeds them to its :class:`ServerConnection`), under one deadline from accept
to authenticated (``login_timeout``). Until authenticated the session is only a *pending login*
(:mod:`proxy.wire.admission`), which a newer one may close; once authenticated it registers
(a session slot, its BackendKeyData pid). Then the session (:mod:`proxy.wire.session`) relays.

:class:`Login` is the session's part that does this; what it uses of the rest of the session
(its client output and state) is :class:`LoginSide`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dp.errors import LaprasError
from proxy.errors import (
    AdminShutdown,
    AuthenticationFailed,
    InvalidAuthorization,
    ProtocolViolation,
    StartupFeatureNotSupported,
    TooManyConnections,
    UpstreamUnavailable,
)
from proxy.wire.auth import Authenticator
from proxy.wire.messages import (
    AuthenticationOk,
    BackendKeyData,
    BackendMessage,
    CancelRequest,
    GSSENCRequest,
    NegotiateProtocolVersion,
    PasswordMessage,
    ReadyForQuery,
    SSLRequest,
    StartupMessage,
    Terminate,
)
from proxy.wire.pool import Pooled, PoolKey, PoolTimeout, ServerPool
from proxy.wire.protocol import ConnectionClosed, Event, ServerConnection
from proxy.wire.upstream import UpstreamConnection, UpstreamStartupError

if TYPE_CHECKING:
    from proxy.wire.channel import Channel
    from proxy.wire.host import ServerConfig, SessionHost
    from proxy.wire.relay import BackendRelay

log = logging.getLogger("lapras.proxy.session")


class LoginFailed(Exception):
    """The authentication exchange failed with ``error`` (28P01/28000): answered after the
    failed-login delay, outside the login deadline."""

    def __init__(self, error: LaprasError) -> None:
        super().__init__(error.message)
        self.error = error


class LoginSide(Protocol):
    """What the login uses of its session: the client's socket and output, and the state
    the login fills in."""

    __slots__ = ()

    cfg: ServerConfig
    server: SessionHost[Any]
    conn: ServerConnection
    relay: BackendRelay
    _client: Channel
    _client_write: Callable[[bytes], None]
    address: str
    user: str
    database: str
    pid: int
    key: int
    upstream: UpstreamConnection | None
    pool: ServerPool | None
    _pooled: Pooled | None
    evicted: bool
    _failure: LaprasError | None
    _handshaking: bool

    def _send(self, msg: BackendMessage) -> None: ...

    def _flush_client(self) -> None: ...

    async def _write(self, *msgs: BackendMessage) -> None: ...

    async def _fatal(self, err: LaprasError) -> None: ...

    async def _drain(self) -> None: ...

    async def _next_event(self) -> Event: ...


class Login(LoginSide):
    """The session's start-up and login (protocol-flow "Start-up")."""

    if not TYPE_CHECKING:  # the session's slots hold its attributes (mypy: see Session)
        __slots__ = ()

    pool: ServerPool | None  # the session's pool of backend connections
    _pooled: Pooled | None  # the one it holds
    _failure: LaprasError | None  # a failed login's answer, held back
    _client_write: Callable[[bytes], None]  # the client's transport's, TLS once started

    def _farewell(self) -> LaprasError:
        """What a cancelled session tells its client."""
        if not self.evicted:
            return AdminShutdown("terminating connection due to administrator command")
        if self._failure is not None:  # evicted while its failure was held back
            return self._failure
        return TooManyConnections(
            "sorry, too many clients already",
            detail="Too many connections were logging in at once; this one had waited longest.",
        )

    async def _startup(self) -> bool:
        """protocol-flow "Start-up": the login, under one deadline from accept to authenticated
        (``login_timeout``, PostgreSQL's ``authentication_timeout``), then the session. Returns
        False when the connection is done (a cancel request, the client gone, timed out)."""
        startup: StartupMessage | None = None
        try:
            async with asyncio.timeout(self.cfg.login_timeout):
                startup = await self._startup_packet()
                if startup is None or not await self._authenticate(startup):
                    return False
        except TimeoutError:
            # As PostgreSQL: the reason goes to the log alone, nothing to a client that may be
            # in the middle of a message (postgres.c ProcessInterrupts, ClientAuthInProgress).
            log.info("canceling authentication due to timeout (client %s)", self.address)
            return False
        except LoginFailed as failed:
            self._failure = failed.error
            delay = self.server.login_failed(self)
            if delay > 0:
                # auth_delay: held back for the whole delay, no longer as a pending login
                # (see proxy.wire.admission for what bounds the guessing instead).
                await asyncio.sleep(delay)
            raise failed.error from None
        return await self._open_session(startup)

    async def _startup_packet(self) -> StartupMessage | None:
        """Read up to the StartupMessage, answering SSLRequest/GSSENCRequest; None when the
        connection is done (a CancelRequest, or the client gone)."""
        while True:
            ev = await self._next_event()
            if isinstance(ev, ConnectionClosed):
                return None
            if isinstance(ev, SSLRequest):
                ctx = self.cfg.ssl_context
                self._client_write(self.conn.send_ssl_answer(ctx is not None))
                if ctx is not None:
                    # No await between the answer and the handshake: the loop reads nothing
                    # more in plain text (the request came alone, ServerConnection checks).
                    self._handshaking = True
                    try:
                        await self._client.start_tls(ctx)
                    except ssl.SSLError as e:  # the client's failure: no answer, a log line
                        log.info("could not accept SSL connection: %s", e.reason or e)
                        return None
                    self._client_write = self._client.transport.write
                    self._handshaking = False
                else:
                    await self._drain()
                continue
            if isinstance(ev, GSSENCRequest):
                self._client_write(self.conn.send_ssl_answer(False))
                await self._drain()
                continue
            if isinstance(ev, CancelRequest):
                await self.server.cancel(ev.pid, ev.key)
                return None
            if isinstance(ev, StartupMessage):
                return ev
            raise ProtocolViolation("unexpected message before startup")

    async def _authenticate(self, startup: StartupMessage) -> bool:
        """The authentication exchange; False when the client leaves it. A failure raises
        LoginFailed (answered later, see _startup)."""
        user = startup.get("user") or ""
        if not user:
            raise InvalidAuthorization("no PostgreSQL user name specified in startup packet")
        repl = (startup.get("replication") or "").lower()
        if repl and repl not in ("false", "off", "no", "0"):
            raise StartupFeatureNotSupported(
                "replication connections are not supported by the LAPRAS proxy"
            )
        # (one copy of each name however many sessions use it)
        self.user = sys.intern(user)
        self.database = sys.intern(startup.get("database") or user)
        refusal = self.server.claim(self)
        if refusal is not None:  # guesses at this name's password from this address
            raise TooManyConnections(refusal, hint="wait a few seconds before trying again")
        neg = self.conn.negotiation_needed()
        if neg is not None:
            self._send(NegotiateProtocolVersion(newest_minor=neg[0], unrecognized=neg[1]))
        auth = Authenticator(self.cfg.auth, user, peer_is_loopback=_is_loopback(self.address))
        try:
            first = auth.start()
            done = not first
            await self._write(*first)
            while not done:
                ev = await self._next_event()
                if isinstance(ev, ConnectionClosed | Terminate):
                    return False
                if not isinstance(ev, PasswordMessage):
                    raise ProtocolViolation("expected password response")
                reply, done = auth.step(ev)
                if reply:
                    await self._write(*reply)
        except (AuthenticationFailed, InvalidAuthorization) as e:
            raise LoginFailed(e) from None
        return True

    async def _open_session(self, startup: StartupMessage) -> bool:
        """After authentication: admission to a session (53300 at a limit, after
        AuthenticationOk as PostgreSQL refuses a role over its connection limit), the upstream
        connection, and the start-up's answer."""
        user = self.user
        self._send(AuthenticationOk())
        self.server.register(self)  # a slot, the BackendKeyData pid; or TooManyConnections
        params = [(k, v) for k, v in startup.params if k not in ("user", "database")]
        if self.cfg.statement_timeout and not any(k == "statement_timeout" for k, _ in params):
            params.append(("statement_timeout", str(int(self.cfg.statement_timeout * 1000))))
        upstream = self.cfg.upstream_for(user)
        up_db = self.cfg.upstream_database or startup.get("database")
        self.pool = self.server.pooler.pool(
            PoolKey(user=user, upstream=upstream, database=up_db, params=tuple(params))
        )
        try:
            self._pooled = await self.pool.acquire(self)
        except UpstreamStartupError as e:
            if e.error.field("C") in ("28P01", "28000") and user in self.cfg.upstream_users:
                # Our own role for this user is missing or has another password: say so to the
                # (authenticated) user, not the backend's text about a role they never named.
                await self._fatal(
                    InvalidAuthorization(
                        f'the backend role "{upstream.user}" of user "{user}" cannot log in',
                        hint="an administrator runs: lapras provision --config lapras.toml",
                    )
                )
                return False
            # The backend's own FATAL (unknown database, unknown GUC...), after our AuthOk
            # just as PostgreSQL sends it after its AuthenticationOk.
            await self._write(e.error)
            return False
        except (UpstreamUnavailable, PoolTimeout) as e:
            await self._fatal(e)
            return False
        except (OSError, TimeoutError) as e:  # a pooled connection's reset failed
            await self._fatal(
                UpstreamUnavailable("could not reset a backend connection", detail=str(e))
            )
            return False
        self.database = sys.intern(up_db or upstream.database)
        pooled = self._pooled
        self.relay.welcome(pooled.reported)
        for ps in pooled.welcome:
            self._send(ps)
        for n in pooled.up.notices:
            self._send(n)
        self._send(BackendKeyData(pid=self.pid, key=self.key))
        self._send(ReadyForQuery(status="I"))
        self._flush_client()
        await self._drain()
        return True


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # no address (a Unix socket), or not an IP address
        return False
