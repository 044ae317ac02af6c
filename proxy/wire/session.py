"""One client session, the client side: it owns the query loop and decides, once, what each
client message is (PgBouncer's ``client.c``).

The roles of a session are modules of their own, as PgBouncer has them:

* :mod:`proxy.wire.login` -- start-up and login (the session's first part);
* this module -- client I/O, the fast lane, and one decision per client message: relay it,
  refuse it, or answer it here (a simple Query is split once, :mod:`proxy.wire.sqlsplit`, and
  each statement routed once, by the router);
* :mod:`proxy.wire.relay` -- the server side: the backend's replies tracked, sans-IO;
* :mod:`proxy.wire.pool` -- the pooler: backend connections shared between sessions, and the
  session's hold on one (:class:`~proxy.wire.pool.PoolClient`: taken, given back, pinned);
* :mod:`proxy.wire.answering` -- local answers (DP answers, the wrappers COPY/DECLARE/PREPARE,
  local cursors, hidden statements);
* :mod:`proxy.wire.replay` -- the two caches that relay whole reads again;
* :mod:`proxy.wire.protocol` -- the client connection's state machine, which alone changes its
  state.

Both sockets are driven by :class:`~proxy.wire.channel.Channel` callbacks, the client's from
accept (login reads what it feeds the state machine), the backend's once the session relays.
An idle session is its objects and one parked coroutine: no streams, no timer unless an idle
timeout is configured. Once the session relays:

* **Backend replies** are handled in the upstream read callback: each frame is relayed to the
  client as it came (no re-encoding), matched against an *expectation* recorded when the
  corresponding client message was forwarded (:class:`proxy.wire.relay.BackendRelay`).
* **Client messages** are read in order. While the session task waits for input, the client's
  read callback handles every message that needs no waiting at once (``_handle_now``): what
  the router relays (it decides synchronously), and local answers that need nothing from the
  backend while the backend owes nothing. The first message that needs waiting -- an
  asynchronous router, the backend's Describe, a local execution, an error to answer -- is left
  for the session task, with everything after it, and with the decision already made about it
  (its statements and their routes). Both paths run the same code; the fast one only saves the
  task switch per message, which is most of the relay's cost in Python.

Errors follow protocol-flow "Extended Query": after an ErrorResponse the backend skips to Sync;
the relay drops the expectations of skipped messages, and the client-side state machine
discards what arrives before the Sync. A refused statement makes the backend's transaction fail
as well (a hidden statement that errors, its error swallowed), so 25P02 and COMMIT -> ROLLBACK
come from PostgreSQL itself (pgwire-research §6.4). Every error and notice is rendered by
:mod:`proxy.errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from dp.errors import LaprasError
from proxy.errors import (
    AdminShutdown,
    FeatureNotSupported,
    IdleInTransactionTimeout,
    IdleSessionTimeout,
    InFailedTransaction,
    ProtocolViolation,
    StartupFeatureNotSupported,
    StatementTooLong,
    UpstreamUnavailable,
    render_error,
    render_unexpected,
)
from proxy.wire.answering import (
    LocalAnswering,
    Portal,
    Statement,
    dup_statement,
    result_format_error,
)
from proxy.wire.channel import Channel
from proxy.wire.heap import trim_heap
from proxy.wire.host import SessionHost
from proxy.wire.local import LocalObjects
from proxy.wire.login import Login
from proxy.wire.messages import (
    BackendMessage,
    Bind,
    Close,
    CopyData,
    CopyDone,
    CopyFail,
    Describe,
    ErrorResponse,
    Execute,
    Flush,
    FunctionCall,
    Parse,
    Query,
    ReadyForQuery,
    Sync,
    Terminate,
    bind_names,
    read_parse,
    read_query,
)
from proxy.wire.pool import PoolClient, Pooled, ServerPool, SessionEffect, session_effect
from proxy.wire.protocol import (
    IDLE_STATES,
    NEED_DATA,
    ConnectionClosed,
    ConnSnapshot,
    ConnState,
    Event,
    MalformedMessage,
    ServerConnection,
)
from proxy.wire.relay import BackendRelay, Kind, SessionClosed
from proxy.wire.replay import MEMO_READ, ReplayMemory, ReplyKey
from proxy.wire.router import (
    AnswerLocally,
    LocalResult,
    Refuse,
    Relay,
    Route,
    SessionInfo,
    StatementInfo,
)
from proxy.wire.settings import SessionSettings
from proxy.wire.sqlsplit import TXN_CONTROL, split_statements
from proxy.wire.upstream import UpstreamConnection

__all__ = ["Kind", "Portal", "Session", "SessionClosed", "Statement"]

log = logging.getLogger("lapras.proxy.session")

# A statement that fails at parse time on every PostgreSQL; used to put the backend's
# transaction into the failed state when the proxy refuses a statement. Its own error is
# swallowed; the server log shows this text.
FAIL_SQL = '"lapras: statement refused by the proxy"'
_FAIL_STMT = "__lapras_refused__"


class _Idle:
    """Set while the backend owes nothing: an :class:`asyncio.Event` without the queue of
    waiters that every idle session would keep."""

    __slots__ = ("_fut", "_set")

    def __init__(self) -> None:
        self._set = True
        self._fut: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        fut, self._fut = self._fut, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        if self._set:
            return
        if self._fut is None:
            self._fut = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._fut)  # (a waiter cancelled leaves the others waiting)


class _IdleTimeout(Exception):
    def __init__(self, error: LaprasError) -> None:
        super().__init__(error.message)
        self.error = error


# The expectation of a malformed message relayed as it came, by its type byte; the backend
# refuses it as it reads it, before looking at any statement or portal (postgres.c, PostgresMain
# and exec_bind_message). Query and Parse are absent: they carry SQL the router has not seen,
# so the proxy answers them itself (read_query, read_parse); a Bind is relayed only when its
# statement is (see _malformed_now).
_MALFORMED_KINDS: dict[int, Kind] = {
    ord("B"): Kind.BIND,
    ord("D"): Kind.DESCRIBE_S,
    ord("E"): Kind.EXECUTE,
    ord("C"): Kind.CLOSE,
    ord("S"): Kind.SYNC,
    ord("H"): Kind.FLUSH,
}

#: A route as the router gave it: decided, or to be awaited by the session task.
Decision = Route | Awaitable[Route]


@dataclass(frozen=True, slots=True)
class _Decided:
    """The decision made about one client message (a Query or a Parse): its statements,
    their information for the router, and their routes."""

    message: Query | Parse
    statements: list[str]
    infos: list[StatementInfo]
    routes: list[Decision]


class Session(Login, PoolClient, LocalAnswering):
    """One client connection, from accept to close: its login (:class:`Login`), the query
    loop and the fast lane (here), local answers (:class:`LocalAnswering`), the backend's
    side (:attr:`relay`) and the replay caches (:attr:`memory`)."""

    # one slot per attribute: an idle session is small (a thousand idle clients)
    __slots__ = (
        "_cancelling",
        "_client",
        "_client_write",
        "_decided",
        "_failure",
        "_frame",
        "_granted",
        "_handshaking",
        "_held_big",
        "_implicit",
        "_local_task",
        "_on_backend",
        "_out",
        "_parked",
        "_pinned",
        "_pooled",
        "_reading_paused",
        "_reply_key",
        "_session_info",
        "_set_portal",
        "_settings",
        "_stash",
        "_tentative",
        "_waiter",
        "address",
        "cfg",
        "conn",
        "database",
        "evicted",
        "idle",
        "key",
        "local",
        "memory",
        "pid",
        "pool",
        "portals",
        "registered",
        "relay",
        "server",
        "statements",
        "stop_requested",
        "upstream",
        "user",
    )

    def __init__(
        self,
        server: SessionHost[Session],
        client: Channel,
        *,
        address: str = "",
    ) -> None:
        self.server = server
        self.cfg = server.config
        self.address = address  # the client's IP address, as admission counts it
        self.conn = ServerConnection(max_message=self.cfg.max_message_size)
        self.pid = 0
        self.key = secrets.randbits(32)
        self.upstream: UpstreamConnection | None = None  # the backend connection held now
        self.pool: ServerPool | None = None  # where it comes from (proxy.wire.pool)
        self._pooled: Pooled | None = None  # ... and goes back to
        self._pinned = False  # keeps its connection (session state in the backend)
        self._cancelling = 0  # cancel requests under way: the connection is kept
        self._granted: asyncio.Future[None] | None = None  # waiting for a connection
        self._settings: dict[str, str] = {}  # its SET statements, replayed after a hand-off
        self._tentative: list[tuple[SessionEffect, str]] = []  # ... in the open block
        self._implicit: tuple[SessionEffect, str] | None = None  # ... by an extended Execute
        # a portal bound to a relayed SET or RESET: (portal, effect, SQL)
        self._set_portal: tuple[str, SessionEffect, str] | None = None
        self._on_backend: dict[str, None] = {}  # its relayed statements the backend holds
        self._out = bytearray()  # for the client, written in one go
        self.statements = {}
        self.portals = {}
        self.local = LocalObjects()
        self.idle = _Idle()  # set while the backend owes nothing
        self.relay = BackendRelay(
            self.conn, self._out, self.local, on_busy=self._on_busy, on_idle=self.portals.clear
        )
        self.memory = ReplayMemory()  # whole reads, relayed again (proxy.wire.replay)
        self.user = ""
        self.database = ""
        self._local_task: asyncio.Future[LocalResult] | None = None
        self._client = client  # the client's socket, read by _on_client_data
        self._client_write: Callable[[bytes], None] = client.transport.write  # TLS: login
        client.bind(self._on_client_data, self._on_client_lost)
        self._waiter: asyncio.Future[None] | None = None  # the task waiting for client input
        self._parked = False  # the task waits for client input in the query loop
        self._stash: tuple[Event, bytes] | BaseException | None = None  # left for the task
        self._reading_paused = False
        self._session_info: SessionInfo | None = None  # the last one made (most stay the same)
        # the decision made about the message left for the task: its statement(s) and routes
        self._decided: _Decided | None = None
        self._reply_key: ReplyKey | None = None  # of the backend read _on_frames handles
        self._frame = b""  # the client message being dispatched, as it came
        self._held_big = False  # a message longer than _ROUTE_IN_TASK came (see _close)
        self.stop_requested = False
        self.registered = False  # authenticated and admitted (server.register)
        self.evicted = False  # closed by the server to make room for a newer login
        self._failure: LaprasError | None = None  # a failed login's answer, held back
        self._handshaking = False  # in the TLS handshake: no message can be sent

    # ---------------------------------------------------------------- client I/O

    def _send(self, msg: BackendMessage) -> None:
        self._out += self.conn.send(msg)

    def _flush_client(self) -> None:
        if self._out:
            try:
                self._client_write(bytes(self._out))
            finally:
                self._out.clear()

    async def _write(self, *msgs: BackendMessage) -> None:
        for m in msgs:
            self._send(m)
        self._flush_client()
        await self._drain()

    async def _fatal(self, err: LaprasError) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._write(render_error(err)), 2.0)

    async def _next_event(self) -> Event:
        """The client's next message during login."""
        while True:
            ev = self.conn.next_event()
            if ev is not NEED_DATA:
                return ev
            self._resume_reading()
            fut = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await fut
            finally:
                self._waiter = None

    async def _drain(self) -> None:
        """Wait while the client's write buffer is full."""
        await self._client.drain()

    def _resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            self._client.resume_reading()

    def _on_client_data(self, data: bytes) -> None:
        """A read from the client (``b""``: end of input), from the event loop. While the
        session task waits for input, messages that only go upstream are relayed here at
        once (``_handle_now``); the first one that needs the task (routing, a local answer,
        waiting) is left for it, with everything after it."""
        whole = self._parked and not self.conn.buffered  # the read starts a message
        if whole and self._relay_known(data):
            return
        self.conn.receive_data(data)
        if self._parked and data and self._fast_lane_open():
            try:
                if self._relay_ready_events(data if whole else None):
                    return  # all relayed: the task sleeps on
            except Exception as e:  # a protocol violation: the task reports it
                self._stash = e
        elif not self._parked and self.conn.buffered > (
            _READ_AHEAD if self.registered else _LOGIN_READ_AHEAD
        ):
            self._client.pause_reading()  # resumed when the task reads again
            self._reading_paused = True
        self._wake_task()

    def _on_client_lost(self, e: BaseException) -> None:
        self.conn.receive_data(b"")
        self._wake_task()

    def _wake_task(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fast_lane_open(self) -> bool:
        up = self.upstream
        return (
            self._stash is None
            and not self.stop_requested
            and not self.relay.closed
            and not (up is not None and up.writing_paused)
            and not self._client.writing_paused
            # with idle timeouts the task keeps the time: it sees every message
            and not (self.cfg.idle_session_timeout or self.cfg.idle_in_transaction_timeout)
        )

    def _relay_ready_events(self, read: bytes | None = None) -> bool:
        """Relay the complete messages buffered while they only go upstream; True when all
        were, False when one is left in ``_stash`` for the task. ``read``: this read's bytes
        when they start a message, to be remembered (:mod:`proxy.wire.replay`) if relayed
        whole."""
        before = self._clean_state() if read is not None and len(read) <= MEMO_READ else None
        binds: list[str] | None = [] if before is not None else None
        while True:
            ev = self.conn.next_event()
            if ev is NEED_DATA:
                break
            self._frame = self.conn.last_frame
            if binds is not None:
                if isinstance(ev, Bind):
                    binds.append(ev.statement)
                elif not isinstance(ev, Execute | Sync):
                    binds = None
            if not self._handle_now(ev):
                self._stash = (ev, self._frame)  # with the decision made about it
                self._flush_client()  # what was answered before it
                return False
            if self._decided is not None:
                self._drop_decision()
        outgoing = self.relay.outgoing
        # (outgoing holds nothing unless the session holds a connection or waits for one:
        # the first message forwarded takes it, PoolClient._backend_needed)
        if outgoing and self.upstream is not None:
            data = bytes(outgoing)
            self.upstream.write(data)
            outgoing.clear()
            if binds is not None and before is not None and data == read and not self._out:
                self.memory.remember_read(before, data, tuple(binds), self.conn, self.relay)
        self._flush_client()  # the local answers of this read, in one write
        return True  # (what waits for a connection goes when it comes: _on_granted)

    def _clean_state(self) -> ConnSnapshot | None:
        """The connection's state when nothing is owed, no batch is open and no portal is
        answered here (:meth:`ReplayMemory.clean`), else None."""
        return None if self.portals else ReplayMemory.clean(self.conn, self.relay)

    def _relay_known(self, data: bytes) -> bool:
        """Relay a remembered read as it came and leave the state it left before; False
        (nothing done) when it is not remembered or the session is not as it was then."""
        if not self.memory.reads:
            return False
        before = self._clean_state()
        known = self.memory.known_read(before, data) if before is not None else None
        if known is None or not self._fast_lane_open():
            return False
        for name in known.binds:
            stmt = self.statements.get(name)
            if stmt is not None and (not isinstance(stmt.route, Relay) or stmt.effect):
                return False  # (a SET is tracked as it is executed: _handle_now)
            if stmt is not None and name not in self._on_backend:
                return False  # to be parsed again first
        if self.upstream is None:
            assert self.pool is not None
            p = self.pool.take(self, own_only=True)  # holding this session's state
            if p is None:
                return False
            self._take(p)
        assert self.upstream is not None
        self.upstream.write(data)
        ReplayMemory.replay_read(known, self.conn, self.relay)
        return True

    def _park(self) -> asyncio.Future[None]:
        """Park the task until the client's next read: the future ``_on_client_data`` sets
        (the fast lane is open meanwhile)."""
        self._parked = True
        self._resume_reading()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = fut
        return fut

    async def _wait_timed(self, fut: asyncio.Future[None]) -> None:
        """Wait for ``fut`` under the idle timeouts, which apply while the session is idle
        (nothing owed by the backend, the client owes the next message). The session may
        become idle while we wait (the backend answers the last Sync), so re-evaluate then."""
        while not fut.done():
            timeout, err = self._idle_timeout()
            if timeout:
                done, _ = await asyncio.wait({fut}, timeout=timeout)
                if not done:
                    assert err is not None
                    raise _IdleTimeout(err)
            elif self.relay.pending:
                idle = asyncio.ensure_future(self.idle.wait())
                both: set[asyncio.Future[object]] = {fut, idle}  # type: ignore[arg-type]
                try:
                    await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    idle.cancel()
            else:
                await fut

    async def _next_idle_event(self) -> Event:
        while True:
            stash = self._stash
            if stash is not None:
                self._stash = None
                if isinstance(stash, BaseException):
                    raise stash
                ev, self._frame = stash
                return ev
            ev = self.conn.next_event()
            if ev is not NEED_DATA:
                self._frame = self.conn.last_frame
                return ev
            if self.relay.outgoing and not self.relay.closed:
                await self._flush_up()
                continue  # input may have come meanwhile: look again before parking
            fut = self._park()
            try:
                if self.cfg.idle_session_timeout or self.cfg.idle_in_transaction_timeout:
                    await self._wait_timed(fut)
                else:
                    await fut  # (not in a coroutine of its own: an idle session is small)
            finally:
                self._parked = False
                self._waiter = None

    @property
    def idle_reading(self) -> bool:
        """Waiting for the client with nothing in flight (shutdown may end it now)."""
        return self._parked and self._is_idle()

    # ---------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        try:
            if self.evicted or self.stop_requested:  # before the task had started (server)
                raise asyncio.CancelledError
            if await self._startup():
                self._start_relaying()
                await self._query_loop()
        except SessionClosed:
            pass
        except (ProtocolViolation, StartupFeatureNotSupported) as e:
            silent = isinstance(e, ProtocolViolation) and e.silent
            if not silent:
                await self._fatal(e)
        except asyncio.CancelledError:
            # Shutdown, or a newer login taking our place (evict): tell the client why, then
            # go -- but not in the middle of the TLS handshake, where a message is garbage.
            if not self._handshaking:
                await self._fatal(self._farewell())
            raise
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except LaprasError as e:
            # Start-up refusals (28P01, 28000, 53300...) are FATAL by their class.
            await self._fatal(e)
        except Exception as e:  # a bug: XX000 to this client only, traceback in the log
            with contextlib.suppress(Exception):
                fatal = render_unexpected(e, where="session", fatal=True)
                await asyncio.wait_for(self._write(fatal), 2.0)
        finally:
            await self._close()

    def _start_relaying(self) -> None:
        """After login: the backend's replies are handled in its socket's callbacks from now
        on, as the client's messages are (the fast lane opens once the task parks)."""
        assert self._pooled is not None
        self.relay.pid = self.pid
        self._take(self._pooled)
        self._release_if_idle()

    async def refuse(self, err: LaprasError) -> None:
        """Refuse the connection at once with a FATAL, before reading anything (the client
        reads it after sending its first packet, as it reads the postmaster's when PostgreSQL
        cannot start a backend)."""
        try:
            await self._fatal(err)
        finally:
            await self._close()

    async def _close(self) -> None:
        try:
            self.conn.close()
            self._drop_decision()
            self.server.leave_pending(self)
            if self.registered:
                self.server.unregister(self)
                self.registered = False
            reusable = self._backend_idle()
            self.relay.close()  # our own close: nothing more to relay or report
            if self.pool is not None:
                self.pool.stop_waiting(self)
            self._give_back(reusable)
            with contextlib.suppress(Exception):
                self._flush_client()
            await self._client.close()
            if self._held_big:
                # What the session kept of big statements (prepared ones hold their text and
                # classification) goes now: give the memory back to the system (proxy.wire.heap).
                self.statements.clear()
                self.portals.clear()
                trim_heap()
        except Exception as e:  # a bug: the session goes anyway, the loop goes on
            log.error("closing session %d failed", self.pid, exc_info=e)
        finally:
            self.server.ended(self)

    # ---------------------------------------------------------------- query loop

    def _idle_timeout(self) -> tuple[float | None, LaprasError | None]:
        if (
            self.relay.pending
            or self.conn.pending_ready
            or self.conn.state not in IDLE_STATES
            or self.conn.batch_open
        ):
            return None, None
        if self.conn.state is ConnState.READY:
            t = self.cfg.idle_session_timeout
            return t, IdleSessionTimeout("terminating connection due to idle-session timeout")
        t = self.cfg.idle_in_transaction_timeout
        return t, IdleInTransactionTimeout(
            "terminating connection due to idle-in-transaction timeout"
        )

    async def _query_loop(self) -> None:
        while True:
            if self.stop_requested and self._is_idle():
                await self._fatal(
                    AdminShutdown("terminating connection due to administrator command")
                )
                return
            try:
                ev = await self._next_idle_event()
            except _IdleTimeout as t:
                await self._fatal(t.error)
                return
            if isinstance(ev, ConnectionClosed):
                return
            if self.relay.closed:
                return
            try:
                await self._dispatch(ev)
            finally:
                self._drop_decision()
            del ev
            if len(self._frame) > MEMO_READ:
                # A big message (up to max_message_size when refused by size) is not kept
                # while the session waits for the next one.
                self._held_big |= len(self._frame) > _ROUTE_IN_TASK
                self._frame = b""
                self.conn.forget_frame()
            if self.conn.state is ConnState.CLOSED:
                return

    def _is_idle(self) -> bool:
        return (
            not self.relay.pending
            and self.conn.pending_ready == 0
            and self.conn.state in IDLE_STATES
            and not self.conn.batch_open
            and self.conn.buffered == 0
        )

    def _handle_now(self, ev: Event) -> bool:
        """Handle ``ev`` at once when that needs no waiting; False when the task must
        (routing by an asynchronous router, the backend's Describe, a local execution, an
        error to answer, replies still owed by the backend before a local answer).
        ``self._frame`` is its frame. Local answers are only queued: the caller sends them.

        Relayed at once: a Query or Parse the router relays; Bind, Describe, Execute, Close
        of a relayed statement or portal; a Sync closing a relayed batch. Answered at once,
        when the backend owes nothing (so the answer keeps its place): a Parse of a statement
        answered here, Bind/Describe/Close of one, an Execute of rows already made, a Sync.
        A malformed message is relayed as it came when the backend answers it as PostgreSQL
        would answer it here (``_malformed_now``)."""
        idle = not self.relay.pending
        if isinstance(ev, Query):
            if len(ev.sql) > _ROUTE_IN_TASK or self._too_long(ev.sql) is not None:
                return False  # refused, or its statements routed one at a time (_simple_query)
            d = self._decision(ev)
            return self._relay_query(d.statements, d.routes)
        if isinstance(ev, Parse):
            if self._too_long(ev.sql) is not None:
                return False
            existing = self.statements.get(ev.name)
            if ev.name and (
                (existing is not None and not isinstance(existing.route, Relay))
                or ev.name in self.local.prepared
            ):
                return False
            d = self._decision(ev)
            info, route = d.infos[0], d.routes[0]
            if isinstance(route, Relay):
                if self._intercepted(ev.sql) is not None:
                    return False
                self._relay_parse(ev, info, route, existing)
                return True
            if (
                not isinstance(route, AnswerLocally | Refuse)
                or not idle
                or (ev.name and existing is not None)
            ):
                return False
            if ev.name == "":
                self.statements.pop("", None)
            return self._prepare_local(ev, info, route)
        if isinstance(ev, Bind):
            stmt = self.statements.get(ev.statement)
            if stmt is None or isinstance(stmt.route, Relay):
                self.portals.pop(ev.portal, None)
                self._ensure_prepared(ev.statement)
                self.relay.forward(self._frame, Kind.BIND)
                if stmt is not None and stmt.effect is not None:
                    self._set_portal = (ev.portal, stmt.effect, stmt.sql)
                elif self._set_portal is not None and self._set_portal[0] == ev.portal:
                    self._set_portal = None  # the portal runs another statement now
                return True
            if (
                not idle
                or isinstance(stmt.route, Refuse)
                or self._bind_portal(self._frame[5:], stmt) is not None
            ):
                return False
        elif isinstance(ev, Execute):
            portal = self.portals.get(ev.portal)
            if portal is None:
                self.relay.forward(self._frame, Kind.EXECUTE)
                sp = self._set_portal
                if sp is not None and sp[0] == ev.portal:
                    self._executed_setting(sp[1], sp[2])
                return True
            if (
                not idle
                or self.conn.txn_status == "E"
                or portal.done
                or result_format_error(portal) is not None
            ):
                return False
            if portal.rows is None and not self._execute_now(portal, ev):
                return False
            self._send_rows(portal, ev)
        elif isinstance(ev, Describe):
            if ev.kind == "S":
                stmt = self.statements.get(ev.name)
                if stmt is None or isinstance(stmt.route, Relay):
                    self._ensure_prepared(ev.name)
                    self.relay.forward(self._frame, Kind.DESCRIBE_S)
                    return True
            elif ev.name not in self.portals and ev.name not in self.local.cursors:
                self.relay.forward(self._frame, Kind.DESCRIBE_P)
                return True
            if not idle or (self.conn.txn_status == "E" and ev.name not in self.portals):
                return False
            self._describe_local(ev)
        elif isinstance(ev, Close):
            if ev.kind == "S":
                stmt = self.statements.get(ev.name)
                if stmt is None or isinstance(stmt.route, Relay):
                    self.statements.pop(ev.name, None)
                    self.relay.forward(self._frame, Kind.CLOSE)
                    return True
            elif ev.name not in self.portals and ev.name not in self.local.cursors:
                self.relay.forward(self._frame, Kind.CLOSE)
                return True
            if not idle:
                return False
            self._close_local(ev)
        elif isinstance(ev, Sync):
            if self.relay.upstream_open or not idle:
                self.relay.forward_sync(self._frame)
                return True
            self._ready_now()
            return True
        elif isinstance(ev, MalformedMessage):
            return self._malformed_now(ev)
        else:
            return False
        return True  # a local answer of Bind, Execute, Describe or Close: sent by the caller

    async def _dispatch(self, ev: Event) -> None:
        if self._handle_now(ev):
            self._flush_client()
            await self._drain()
            return
        if isinstance(ev, Query):
            await self._simple_query(ev)
        elif isinstance(ev, Parse):
            await self._parse(ev)
        elif isinstance(ev, Bind):
            await self._bind(ev.statement)
        elif isinstance(ev, Describe):
            await self._describe(ev)
        elif isinstance(ev, Execute):
            await self._execute(ev)
        elif isinstance(ev, Close):
            await self._close_msg(ev)
        elif isinstance(ev, Flush):
            await self._flush()
        elif isinstance(ev, Terminate):
            raise SessionClosed
        elif isinstance(ev, CopyData | CopyDone | CopyFail):
            self._copy_message(end=not isinstance(ev, CopyData))
        elif isinstance(ev, FunctionCall):
            await self._function_call()
        elif isinstance(ev, MalformedMessage):
            await self._malformed(ev)
        else:
            raise ProtocolViolation(f"unexpected message {type(ev).__name__}")

    def _copy_message(self, *, end: bool) -> None:
        """CopyData, CopyDone or CopyFail (``end``) from the client, as it came."""
        self.relay.copy_message(self._frame, end=end)

    async def _function_call(self) -> None:
        if await self._settle():
            self.conn.ready_skipped()
            return
        # protocol-flow "Function Call": answered like a simple Query, so the error is
        # followed by ReadyForQuery (and fails an open transaction, as any error does).
        err = FeatureNotSupported(
            "the function call protocol message is not supported by the LAPRAS proxy",
            hint="call the function in a SELECT statement instead",
        )
        await self._refuse(err, extended=False)
        await self._ready()

    def _malformed_now(self, ev: MalformedMessage) -> bool:
        """Relay a malformed message as it came when the backend answers it as PostgreSQL
        would here: Describe, Execute, Close, Sync and Flush, whose content PostgreSQL reads
        before it looks at any statement or portal, and a Bind whose names do not read or
        whose statement is relayed or unknown here (the backend reads names, then looks the
        statement up, then reads the rest). False for the task: Query and Parse (SQL the
        router has not seen never goes to the backend), a Bind to a statement answered here,
        FunctionCall, and the copy messages."""
        tb = ev.type_byte
        kind = _MALFORMED_KINDS.get(tb)
        if kind is None:
            return False
        if kind is Kind.BIND:
            names = bind_names(ev.body)
            if names is not None:
                stmt = self.statements.get(names[1])
                if stmt is not None and not isinstance(stmt.route, Relay):
                    return False
                self.portals.pop(names[0], None)
        if kind is Kind.SYNC:
            self.relay.forward_sync(ev.frame)  # a Sync with a body still ends the batch
        else:
            self.relay.forward(ev.frame, kind)
        return True

    async def _malformed(self, ev: MalformedMessage) -> None:
        """A malformed message the proxy answers itself (``_malformed_now`` relays the rest)."""
        tb, body = ev.type_byte, ev.body
        if tb in b"QP":
            try:
                m = read_query(body) if tb == _Q else read_parse(body)
            except LaprasError as e:
                if tb == _P:
                    await self._refuse(e, extended=True, checks_transaction=False)
                    return
                if await self._settle():  # inside a failed extended batch: never read
                    self.conn.ready_skipped()
                    return
                # Not an extended-query message, so no skipping: ERROR, then ReadyForQuery.
                await self._refuse(e, extended=False, checks_transaction=False)
                await self._ready()
                return
            # Valid as PostgreSQL reads it (a Parse of 32768 or more parameter types).
            await self._dispatch(m)
            return
        if tb == _B:
            names = bind_names(body)
            assert names is not None  # else relayed by _malformed_now
            await self._bind(names[1])
        elif tb == _F:
            # PostgreSQL would report the malformed arguments; the proxy serves no function
            # call, malformed or not, and says so.
            await self._function_call()
        elif tb in b"cf":
            self._copy_message(end=True)
        else:  # pragma: no cover - _malformed_now relays every other type
            raise ProtocolViolation(f"unexpected malformed message {chr(tb)!r}")

    # ---------------------------------------------------------------- the backend's side
    # What goes upstream is buffered in the relay: what the client pipelined goes in one write
    # (one wake-up of the backend), flushed before we wait for anything (client input or
    # backend replies).

    async def _flush_up(self) -> None:
        outgoing = self.relay.outgoing
        if outgoing and not self.relay.closed:
            if self.upstream is None:
                assert self._granted is not None  # (see _relay_ready_events)
                await self._granted  # the bytes go out when it comes (_on_granted)
            up = self.upstream
            assert up is not None
            if outgoing:
                data = bytes(outgoing)
                outgoing.clear()
                up.write(data)
            await up.drain()

    def _on_busy(self) -> None:
        self.idle.clear()
        self._backend_needed()

    def _relayed_statement(self, name: str) -> Parse | None:
        st = self.statements.get(name)
        if st is None or not isinstance(st.route, Relay):
            return None
        return Parse(name=name, sql=st.sql, param_oids=st.param_oids)

    async def _quiesce(self) -> None:
        """Wait until the backend has answered everything forwarded so far."""
        if self.relay.pending:
            self.relay.flush()
        await self._flush_up()
        if self.relay.pending:
            await self.idle.wait()
        if self.relay.closed:
            raise SessionClosed
        await self._drain()

    async def _settle(self) -> bool:
        """Quiesce; True when an error meanwhile put the client into skip-until-Sync, so the
        message being handled must be discarded (PostgreSQL would never have read it)."""
        await self._quiesce()
        return self.conn.state is ConnState.SKIP_UNTIL_SYNC

    def _on_frames(self, frames: list[bytes]) -> None:
        """What one read from the backend brought, handled in the event loop's callback
        (no task switch on the relay's hot path)."""
        relay = self.relay
        if relay.closed:
            return
        key, self._reply_key = self._reply_key, None
        before = list(relay.pending) if key is not None and not self._out else None
        try:
            relay.feed(frames)
            if before is not None and key is not None:
                self.memory.remember_reply(key, before, frames, self._out, self.conn, relay)
            self._flush_client()
        except ProtocolViolation as e:  # the backend sent something undecodable
            self._upstream_gone(e)
            return
        except Exception as e:
            render_unexpected(e, where="upstream relay")
            self._upstream_gone(e)
            return
        self._after_backend_read()

    def _after_backend_read(self) -> None:
        if self._tentative and self.conn.txn_status == "I":
            self._transaction_ended()
        if self._implicit is not None and not self.relay.pending:
            self._batch_ended()
        if not self.relay.pending:
            self.idle.set()
            self._release_if_idle()
        if self._client.writing_paused and self.upstream:
            # The client reads slower than the backend writes: stop reading the backend
            # until the client has caught up (what awaiting drain() did in a read loop).
            self.upstream.pause_reading()
            self.server.keep(asyncio.create_task(self._resume_upstream()))

    def _on_backend_read(self, data: bytes) -> bool:
        """Relay a remembered backend read as it came and leave the state it left before
        (:mod:`proxy.wire.replay`); False (nothing done) when it is not remembered for this
        state."""
        if self.relay.closed:
            return False
        key = (
            None
            if self.portals or self.local.watching or self.relay.tags is not None
            else ReplayMemory.reply_key(self.conn, self.relay, data)
        )
        known = self.memory.known_reply(key) if key is not None else None
        if known is None:
            self._reply_key = key  # for _on_frames to remember
            return False
        ReplayMemory.replay_reply(known, self.conn, self.relay)
        self._out += data
        try:
            self._flush_client()
        except Exception as e:
            self._upstream_gone(e)
            return True
        self._after_backend_read()
        return True

    async def _resume_upstream(self) -> None:
        with contextlib.suppress(Exception):
            await self._drain()
        if self.upstream is not None and not self.relay.closed:
            self.upstream.resume_reading()

    def _on_upstream_lost(self, e: BaseException) -> None:
        if not self.relay.closed:
            self._upstream_gone(e)

    def _upstream_gone(self, e: BaseException) -> None:
        log.info("session %d: upstream connection lost: %s", self.pid, e)
        self._end(
            UpstreamUnavailable("terminating connection because the upstream server closed it")
        )

    def _end(self, err: LaprasError) -> None:
        """End the session from a callback: ``err`` to the client, nothing more relayed."""
        self.relay.close()
        if self.conn.state is not ConnState.CLOSED:
            with contextlib.suppress(Exception):
                self._send(render_error(err))
                self._flush_client()
        self.idle.set()
        self._client.transport.close()

    def _info(
        self, sql: str, protocol: str, name: str = "", oids: tuple[int, ...] = ()
    ) -> StatementInfo:
        app = self.relay.params.get("application_name", "")
        zone = self.relay.params.get("TimeZone", "UTC")
        si = self._session_info
        if (
            si is None
            or si.txn_status != self.conn.txn_status
            or si.application_name != app
            or si.time_zone != zone
        ):
            si = self._session_info = SessionInfo(
                user=self.user,
                database=self.database,
                application_name=app,
                session_pid=self.pid,
                txn_status=self.conn.txn_status,
                # the session's lapras.* settings, from its start-up values (one object)
                settings=si.settings if si is not None else SessionSettings(self.relay.params),
                time_zone=zone,
            )
        return StatementInfo(
            sql=sql,
            protocol="simple" if protocol == "simple" else "extended",
            statement_name=name,
            param_oids=oids,
            session=si,
        )

    # ---------------------------------------------------------------- one decision per message
    # A Query is split once (proxy.wire.sqlsplit) and each statement routed once, a Parse
    # routed once, whether the read callback or the task handles the message: the read
    # callback's decision about the message it leaves for the task goes with it.

    def _decision(self, m: Query | Parse) -> _Decided:
        """The statements of ``m``, their information and their routes (made once)."""
        d = self._decided
        if d is not None and d.message is m:
            return d
        self._drop_decision()
        if isinstance(m, Query):
            stmts = split_statements(m.sql)
            infos = [self._info(s, "simple") for s in stmts]
        else:
            stmts = [m.sql]
            infos = [self._info(m.sql, "extended", m.name, m.param_oids)]
        d = self._decided = _Decided(m, stmts, infos, [self._decide(i) for i in infos])
        return d

    def _decide(self, info: StatementInfo) -> Decision:
        """The router's route of one statement, as it gives it: decided, or to be awaited
        (``_resolve``). An error of the router is the statement's refusal."""
        try:
            return self.server.router.route(info)
        except Exception as e:
            return _refusal(e)

    async def _resolve(self, r: Decision) -> Route:
        if isinstance(r, Relay | Refuse | AnswerLocally):
            return r
        try:
            return await r
        except Exception as e:
            return _refusal(e)

    def _drop_decision(self) -> None:
        """The message decided about is handled (or never will be)."""
        d, self._decided = self._decided, None
        if d is not None:
            for r in d.routes:
                if inspect.iscoroutine(r):
                    r.close()  # never awaited (a finished one: nothing happens)

    async def _ready(self) -> None:
        """Send ReadyForQuery with the backend's status (nothing is pending upstream)."""
        self._ready_now()
        self._flush_client()
        await self._drain()

    def _ready_now(self) -> None:
        self._send(ReadyForQuery(status=self.conn.txn_status))  # type: ignore[arg-type]
        if self.conn.txn_status == "I":
            self.portals.clear()

    async def _fail_upstream(self, extended: bool) -> None:
        """Make the backend's transaction (or open extended batch) fail like ours."""
        if extended:
            self.relay.forward(
                Parse(name=_FAIL_STMT, sql=FAIL_SQL).encode(), Kind.PARSE, forward=False, sink=[]
            )
        else:
            self.relay.forward(Query(sql=FAIL_SQL).encode(), Kind.QUERY, forward=False, sink=[])
        await self._quiesce()

    async def _refuse(
        self,
        err: LaprasError | ErrorResponse,
        *,
        extended: bool,
        checks_transaction: bool = True,
    ) -> None:
        """Answer ``err`` for the current statement, keeping the backend in step.

        Any ERROR inside a transaction block aborts it, and in the extended protocol an error
        also rolls back the implicit transaction of the batch (protocol-flow "Extended Query").
        So when the backend has a transaction open, a statement that fails there too is sent
        (its own error swallowed): 25P02 and COMMIT -> ROLLBACK then come from PostgreSQL.
        In a failed transaction the answer is 25P02, unless ``checks_transaction`` is False:
        ``err`` is what PostgreSQL finds before it looks at the transaction (a malformed
        message; a Bind checked in PostgreSQL's order, see ``_bind_portal``)."""
        if await self._settle():
            return
        if self.conn.txn_status == "E":
            if checks_transaction:
                err = InFailedTransaction()
        elif self.conn.txn_status == "T" or (extended and self.relay.upstream_open):
            await self._fail_upstream(extended)
        self._send(err if isinstance(err, ErrorResponse) else render_error(err))
        self._flush_client()

    def _relay_query(self, stmts: list[str], routes: Sequence[Decision]) -> bool:
        """Relay the Query being dispatched when every statement in it is relayed (False,
        nothing done, otherwise)."""
        relays = [r for r in routes if isinstance(r, Relay)]
        if len(relays) != len(stmts) or any(self._intercepted(s) for s in stmts):
            return False
        # A simple Query destroys the unnamed statement and portal (protocol-flow).
        self.statements.pop("", None)
        self.portals.pop("", None)
        for s in stmts:
            self._on_simple_statement(s)
        undo = self._session_state(stmts)
        data = self._frame  # the client's Query, as it came
        if any(r.sql is not None for r in relays):
            sql = ";\n".join(r.sql or s for s, r in zip(stmts, relays, strict=True))
            data = Query(sql=sql).encode()
        e = self.relay.forward(data, Kind.QUERY, on_fail=self.conn.ready_skipped, on_error=undo)
        if e.failed and undo is not None:  # skipped: it never ran
            undo()
        return True

    def _too_long(self, sql: str) -> StatementTooLong | None:
        """The refusal of SQL text longer than ``max_statement_size`` bytes; None if it fits."""
        limit = self.cfg.max_statement_size
        if len(sql) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character
            return None
        size = len(sql) if sql.isascii() else len(sql.encode())
        return StatementTooLong(size, limit) if size > limit else None

    async def _simple_query(self, m: Query) -> None:
        """protocol-flow "Simple Query", statement by statement when the router must."""
        sql = m.sql
        too_long = self._too_long(sql)
        if too_long is not None:  # refused before anything is split, routed or parsed
            if await self._settle():
                self.conn.ready_skipped()
                return
            # (also in a failed transaction: PostgreSQL reads a statement before it looks
            # at the transaction)
            await self._refuse(too_long, extended=False, checks_transaction=False)
            await self._ready()
            return
        routes: list[Route] = []
        if len(sql) > _ROUTE_IN_TASK:
            # A long Query may hold many statements the router decides at once, each taking
            # a while: they are routed one at a time, the loop serving the other sessions
            # between them.
            stmts = split_statements(sql)
            for s in stmts:
                routes.append(await self._resolve(self._decide(self._info(s, "simple"))))
                await asyncio.sleep(0)
        else:
            d = self._decision(m)
            stmts = d.statements
            for r in d.routes:
                routes.append(await self._resolve(r))
        if self._relay_query(stmts, routes):
            return
        # A simple Query destroys the unnamed statement and portal (protocol-flow).
        self.statements.pop("", None)
        self.portals.pop("", None)
        if await self._settle():
            self.conn.ready_skipped()
            return
        # Several statements in one Query run as one implicit transaction (protocol-flow
        # "Multiple Statements in a Simple Query"). Relayed one by one they would not, so
        # wrap them in a hidden BEGIN ... COMMIT/ROLLBACK unless they manage transactions
        # themselves.
        wrap = (
            self.conn.txn_status == "I"
            and len(stmts) > 1
            and not any(TXN_CONTROL.match(s) for s in stmts)
        )
        if wrap:
            await self._hidden_query("BEGIN")
        ok = True
        for s, r in zip(stmts, routes, strict=True):
            # (decided now: an earlier statement of the Query may have made the cursor)
            command = self._intercepted(s) if isinstance(r, Relay) else None
            if command is not None:
                ok = await self._simple_command(command)
            elif isinstance(r, Relay):
                self._on_simple_statement(s)
                undo = self._session_state([s])
                e = self.relay.forward(
                    Query(sql=r.sql or s).encode(), Kind.QUERY, forward_ready=False
                )
                await self._quiesce()
                ok = not e.failed
                if not ok and undo is not None:
                    undo()
            elif isinstance(r, Refuse):
                await self._refuse(r.error, extended=False)
                ok = False
            else:
                ok = await self._simple_local(s, r)
            if not ok:
                break
        if wrap:
            end = await self._hidden_query("COMMIT" if ok else "ROLLBACK")
            for msg in end:
                if isinstance(msg, ErrorResponse):
                    self._send(msg)  # e.g. a deferred constraint failing at COMMIT
        await self._ready()

    def _relay_parse(
        self, m: Parse, info: StatementInfo, route: Relay, existing: Statement | None
    ) -> None:
        frame = self._frame
        if route.sql is not None:
            m = Parse(name=m.name, sql=route.sql, param_oids=m.param_oids)
            frame = m.encode()
        effect = session_effect(m.sql)
        if effect is not None and effect.kind == "pin":
            self._pin()
            effect = None
        stmt = Statement(sql=m.sql, route=route, param_oids=m.param_oids, info=info, effect=effect)
        if m.name and existing is not None:
            self.relay.forward(self._frame, Kind.PARSE)  # the backend answers 42P05
            return
        self.statements[m.name] = stmt

        def dropped(name: str = m.name, s: Statement = stmt) -> None:
            if self.statements.get(name) is s:
                del self.statements[name]

        self.relay.forward(frame, Kind.PARSE, on_fail=dropped)
        self._on_backend[m.name] = None  # (after the forward, which takes the connection)

    async def _parse(self, m: Parse) -> None:
        """protocol-flow "Extended Query", Parse."""
        too_long = self._too_long(m.sql)
        if too_long is not None:  # refused before it is routed or parsed: skip to Sync
            await self._refuse(too_long, extended=True, checks_transaction=False)
            return
        existing = self.statements.get(m.name)
        if m.name and (
            (existing is not None and not isinstance(existing.route, Relay))
            or m.name in self.local.prepared
        ):
            await self._local_error(dup_statement(m.name))
            return
        d = self._decision(m)
        info, route = d.infos[0], await self._resolve(d.routes[0])
        command = None
        if isinstance(route, Relay):
            command = self._intercepted(m.sql)
            if command is None:
                self._relay_parse(m, info, route, existing)
                return
            route = self._command_route(command)
        await self._parse_local(m, info, route, command, existing)

    async def _flush(self) -> None:
        self.relay.flush()
        await self._flush_up()

    def cancel(self) -> None:
        """A matching CancelRequest arrived (protocol-flow "Canceling Requests in Progress")."""
        if self._local_task is not None and not self._local_task.done():
            self._local_task.cancel()
            return
        if self.upstream is not None and self.relay.pending:
            self.server.keep(asyncio.create_task(self._cancel_upstream(self.upstream)))

    async def _cancel_upstream(self, up: UpstreamConnection) -> None:
        """Cancel what the backend runs; the connection is kept meanwhile, so that the
        cancel never reaches another client's query on it."""
        self._cancelling += 1
        try:
            await up.cancel()
        finally:
            self._cancelling -= 1
        if self._pooled is not None and self._pooled.up is up:
            self._release_if_idle()


def _refusal(e: Exception) -> Refuse:
    """The route of a statement the router failed on: its error, or XX000 for a bug."""
    if isinstance(e, LaprasError):
        return Refuse(e)
    render_unexpected(e, where="router.route")
    return Refuse(LaprasError("internal error in the LAPRAS proxy; see the server log"))


_P, _Q = b"PQ"
_B, _F = b"BF"
#: A Query longer than this (characters) is handled by the session's task, not from the read
#: callback: it is checked against ``max_statement_size``, and its statements are routed one
#: at a time with the loop free for other sessions in between.
_ROUTE_IN_TASK = 64 * 1024

# Client bytes buffered beyond this while the task is busy pause reading from the client;
# before it has logged in, beyond the longest start-up packet and password message, and more.
_READ_AHEAD = 1 << 20
_LOGIN_READ_AHEAD = 64 * 1024
