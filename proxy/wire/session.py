"""One client session: start-up, authentication, then the query loop over a pinned upstream.

Start-up and login run in the session task on asyncio streams, under one deadline from accept
to authenticated (``login_timeout``). Until authenticated the session is only a *pending login*
(:mod:`proxy.wire.admission`), which a newer one may close; once authenticated it registers
(a session slot, its BackendKeyData pid). After login both sockets are taken over by
:class:`~proxy.wire.channel.Channel` callbacks:

* **Backend replies** are handled in the upstream read callback: each frame is relayed to the
  client as it came (no re-encoding), matched against an *expectation* recorded when the
  corresponding client message was forwarded.
* **Client messages** are read in order. While the session task waits for input, the client's
  read callback handles every message that needs no waiting at once (``_handle_now``): what
  the router relays (it decides synchronously), and local answers that need nothing from the
  backend while the backend owes nothing. The first message that needs waiting -- an
  asynchronous router, the backend's Describe, a local execution, an error to answer -- is left
  for the session task, with everything after it. Both paths run the same code; the fast one
  only saves the task switch per message, which is most of the relay's cost in Python.

Before any local answer the session *quiesces*: it sends Flush upstream and waits until every
earlier expectation is met, so local and relayed replies leave in the client's message order
(PgDog's buffering pattern; pgwire-research §6.7).

A DP answer in a wrapper (``COPY ... TO STDOUT``, ``DECLARE ... CURSOR``, ``PREPARE ... AS``) is
delivered as the wrapper says; the cursors and SQL-prepared statements made so are the
session's own (:class:`proxy.wire.local.LocalObjects`), and the commands naming them (FETCH,
MOVE, CLOSE, EXECUTE, DEALLOCATE) are answered here, every other such command relayed.

Errors follow protocol-flow "Extended Query": after an ErrorResponse the backend skips to Sync;
the relay drops the expectations of skipped messages, and the client-side state machine
discards what arrives before the Sync. A refused statement makes the backend's transaction fail
as well (a hidden statement that errors, its error swallowed), so 25P02 and COMMIT -> ROLLBACK
come from PostgreSQL itself (pgwire-research §6.4). As in PostgreSQL, a refused statement is
prepared (Parse, Describe) and refused at Bind.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import ipaddress
import logging
import re
import secrets
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dp.errors import LaprasError
from proxy.errors import (
    AdminShutdown,
    AuthenticationFailed,
    DuplicateCursor,
    DuplicatePreparedStatement,
    FeatureNotSupported,
    IdleInTransactionTimeout,
    IdleSessionTimeout,
    InFailedTransaction,
    InvalidAuthorization,
    InvalidBinaryRepresentation,
    InvalidParameterValue,
    InvalidStatementName,
    NoActiveTransaction,
    NotInPrerequisiteState,
    ProtocolError,
    ProtocolViolation,
    QueryCanceled,
    StartupFeatureNotSupported,
    StatementTooLong,
    TooManyConnections,
    UndefinedCursor,
    UnsupportedFormatCode,
    UpstreamUnavailable,
    render_error,
    render_unexpected,
)
from proxy.wire import types as pgtypes
from proxy.wire.auth import Authenticator
from proxy.wire.channel import Channel
from proxy.wire.copyout import copy_data, copy_response
from proxy.wire.heap import trim_heap
from proxy.wire.local import Cursor, LocalObjects, Prepared
from proxy.wire.messages import (
    AuthenticationOk,
    BackendKeyData,
    BackendMessage,
    Bind,
    BindComplete,
    CancelRequest,
    Close,
    CloseComplete,
    CommandComplete,
    CopyData,
    CopyDone,
    CopyFail,
    DataRow,
    Describe,
    ErrorResponse,
    Execute,
    FieldDescription,
    Flush,
    FunctionCall,
    GSSENCRequest,
    NegotiateProtocolVersion,
    NoData,
    NoticeResponse,
    ParameterDescription,
    ParameterStatus,
    Parse,
    ParseComplete,
    PasswordMessage,
    PortalSuspended,
    PqReader,
    Query,
    ReadyForQuery,
    RowDescription,
    SSLRequest,
    StartupMessage,
    Sync,
    Terminate,
    bind_names,
    decode_backend,
    read_parse,
    read_query,
)
from proxy.wire.protocol import (
    IDLE_STATES,
    NEED_DATA,
    ConnectionClosed,
    ConnState,
    Event,
    MalformedMessage,
    ServerConnection,
)
from proxy.wire.router import (
    AnswerLocally,
    Column,
    EncodedCell,
    Execution,
    LocalResult,
    Refuse,
    Relay,
    Route,
    SessionInfo,
    StatementInfo,
    field_from_column,
    resolve_formats,
)
from proxy.wire.sqlsplit import split_statements
from proxy.wire.upstream import Described, UpstreamConnection, UpstreamStartupError
from rewriter import wrappers
from rewriter.errors import SqlSyntaxError
from rewriter.wrappers import (
    CloseCursor,
    Command,
    CopyTo,
    Deallocate,
    DeclareCursor,
    ExecutePrepared,
    Fetch,
    NamesCursor,
    NamesStatement,
    PrepareAs,
)

if TYPE_CHECKING:
    from proxy.wire.server import ProxyServer

log = logging.getLogger("lapras.proxy.session")

# A statement that fails at parse time on every PostgreSQL; used to put the backend's
# transaction into the failed state when the proxy refuses a statement. Its own error is
# swallowed; the server log shows this text.
FAIL_SQL = '"lapras: statement refused by the proxy"'
_FAIL_STMT = "__lapras_refused__"
_DESCRIBE_STMT = "__lapras_describe__"
_RESET_ALL = re.compile(r"^\s*(DEALLOCATE\s+(PREPARE\s+)?ALL|DISCARD\s+ALL)\s*;?\s*$", re.I)
_TXN_CONTROL = re.compile(
    r"^\s*(BEGIN|START|COMMIT|END|ROLLBACK|ABORT|SAVEPOINT|RELEASE|PREPARE\s+TRANSACTION)\b",
    re.I,
)
_DEALLOCATE = re.compile(r'^\s*DEALLOCATE\s+(?:PREPARE\s+)?("?)([^";\s]+)\1\s*;?\s*$', re.I)
_CLOSE_ALL = re.compile(r"^\s*CLOSE\s+ALL\s*;?\s*$", re.I)
# A statement that may address a cursor or statement the session holds (proxy.wire.local):
# the verbs rewriter.wrappers.command reads, or a comment before the first word.
_COMMAND_VERB = re.compile(
    r"\s*(?:/\*|--|(?:FETCH|MOVE|CLOSE|EXECUTE|DEALLOCATE|DECLARE|PREPARE)\b)", re.I
)
# Hidden checks of names the backend may hold (a DECLARE or PREPARE answered here takes a
# name PostgreSQL would refuse if it were taken there).
_CURSOR_TAKEN = "SELECT EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE name = $1)"
_STATEMENT_TAKEN = "SELECT EXISTS (SELECT FROM pg_catalog.pg_prepared_statements WHERE name = $1)"
_CHECK_STMT = "__lapras_check__"


class _IdleTimeout(Exception):
    def __init__(self, error: LaprasError) -> None:
        super().__init__(error.message)
        self.error = error


class _LoginFailed(Exception):
    """The authentication exchange failed with ``error`` (28P01/28000): answered after the
    failed-login delay, outside the login deadline."""

    def __init__(self, error: LaprasError) -> None:
        super().__init__(error.message)
        self.error = error


class SessionClosed(Exception):
    """The session must end (client gone, upstream gone, FATAL sent)."""


class Kind(enum.Enum):
    PARSE = "P"
    BIND = "B"
    DESCRIBE_S = "DS"
    DESCRIBE_P = "DP"
    EXECUTE = "E"
    CLOSE = "C"
    SYNC = "S"
    QUERY = "Q"
    FUNCTION = "F"
    FLUSH = "H"  # only a malformed Flush is forwarded as an expectation: it gets an error

    __hash__ = object.__hash__  # identity: members are singletons (see ConnState)


_EXTENDED_KINDS = frozenset(
    {
        Kind.PARSE,
        Kind.BIND,
        Kind.DESCRIBE_S,
        Kind.DESCRIBE_P,
        Kind.EXECUTE,
        Kind.CLOSE,
        Kind.FLUSH,
    }
)
_READY_KINDS = frozenset({Kind.QUERY, Kind.SYNC, Kind.FUNCTION})
# The backend message type that completes each expectation (protocol-flow).
_COMPLETES: dict[Kind, frozenset[int]] = {
    Kind.PARSE: frozenset(b"1"),
    Kind.BIND: frozenset(b"2"),
    Kind.CLOSE: frozenset(b"3"),
    Kind.DESCRIBE_S: frozenset(b"Tn"),
    Kind.DESCRIBE_P: frozenset(b"Tn"),
    Kind.EXECUTE: frozenset(b"CIs"),
    Kind.SYNC: frozenset(b"Z"),
    Kind.QUERY: frozenset(b"Z"),
    Kind.FUNCTION: frozenset(b"Z"),
    Kind.FLUSH: frozenset(),  # never completed: answered by the error that ends it
}
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


@dataclass(slots=True)
class Expect:
    """A reply the backend owes for one forwarded message."""

    kind: Kind
    forward: bool = True  # relay the replies to the client (False: hidden message)
    forward_ready: bool = True  # relay the closing ReadyForQuery (Query/Sync)
    sink: list[BackendMessage] | None = None  # collect hidden replies here
    on_fail: Callable[[], None] | None = None  # the message failed or was skipped
    failed: bool = False


@dataclass(frozen=True, slots=True)
class _Relayed:
    """A client read relayed whole from a clean state (``Session._relay_known``): its Binds'
    statements, and the state it left."""

    binds: tuple[str, ...]
    kinds: tuple[Kind, ...]  # the expectations it left, in order
    state: ConnState
    pending_ready: int
    batch_open: bool
    upstream_open: bool
    need_flush: bool


@dataclass(frozen=True, slots=True)
class _Replied:
    """The state a backend read relayed whole left (``Session._on_backend_read``)."""

    state: ConnState
    txn_status: str
    pending_ready: int
    status: str


@dataclass(slots=True)
class Statement:
    sql: str
    route: Route
    param_oids: tuple[int, ...]  # declared
    described: Described | None = None
    info: StatementInfo | None = None
    # A command answered here (FETCH, CLOSE, EXECUTE ... of what the session holds)
    command: Command | None = None


@dataclass(slots=True)
class Portal:
    statement: Statement
    params: tuple[object, ...]
    raw_params: tuple[bytes | None, ...]
    param_formats: tuple[int, ...]
    fields: tuple[FieldDescription, ...]
    rows: list[tuple[bytes | None, ...]] | None = None
    sent: int = 0
    tag: str = ""
    notices: list[NoticeResponse] = field(default_factory=list)
    verb: str = "SELECT"  # of the tag of a chunk of rows without ``tag`` (FETCH: "FETCH n")
    # a command without rows of its own (DECLARE, COPY, MOVE ...) ran: PostgreSQL marks such
    # a portal done, and another Execute of it is 55000 "portal cannot be run"
    done: bool = False


class Session:
    def __init__(
        self,
        server: ProxyServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        address: str = "",
    ) -> None:
        self.server = server
        self.cfg = server.config
        self.reader = reader
        self.writer = writer
        self.address = address  # the client's IP address, as admission counts it
        self.conn = ServerConnection(max_message=self.cfg.max_message_size)
        self.pid = 0
        self.key = secrets.randbits(32)
        self.upstream: UpstreamConnection | None = None
        self.pending: deque[Expect] = deque()
        self.idle = asyncio.Event()
        self.idle.set()
        self.status = "I"  # the backend's transaction status, from its last ReadyForQuery
        self.upstream_open = False  # extended messages sent upstream since the last Sync
        self.need_flush = False
        self.copy_in = False
        self.statements: dict[str, Statement] = {}
        self.portals: dict[str, Portal] = {}
        self.local = LocalObjects()  # cursors and SQL-prepared statements answered here
        self.params: dict[str, str] = {}
        self.user = ""
        self.database = ""
        self._out = bytearray()
        self._local_task: asyncio.Future[LocalResult] | None = None
        self._client: Channel | None = None  # the client socket once logged in
        self._client_write: Callable[[bytes], None] = writer.write
        self._waiter: asyncio.Future[None] | None = None  # the task waiting for client input
        self._parked = False  # the task waits for client input in the query loop
        self._stash: tuple[Event, bytes] | BaseException | None = None  # left for the task
        self._reading_paused = False
        self._session_info: SessionInfo | None = None  # the last one made (most stay the same)
        self._routed: tuple[StatementInfo, Route] | None = None  # the last synchronous route
        self._up_buf = bytearray()
        # reads relayed whole, by the state they came in and their bytes (see _relay_known)
        self._relayed: dict[tuple[ConnState, bytes], _Relayed] = {}
        # backend reads relayed whole, by the state they came in and their bytes (see
        # _on_backend_read), and the key of the read _on_frames is handling
        self._replies: dict[tuple[object, ...], _Replied] = {}
        self._reply_key: tuple[object, ...] | None = None
        self._frame = b""  # the client message being dispatched, as it came
        self._held_big = False  # a message longer than _ROUTE_IN_TASK came (see _close)
        self._upstream_dead = False
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

    async def _read(self, timeout: float | None) -> bytes:
        if timeout is None:
            return await self.reader.read(65536)
        return await asyncio.wait_for(self.reader.read(65536), timeout)

    async def _next_event(self, timeout: float | None = None) -> Event:
        while True:
            ev = self.conn.next_event()
            if ev is not NEED_DATA:
                return ev
            self.conn.receive_data(await self._read(timeout))

    async def _drain(self) -> None:
        """Wait while the client's write buffer is full."""
        if self._client is not None:
            await self._client.drain()
        else:
            await self.writer.drain()

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
        elif not self._parked and self.conn.buffered > _READ_AHEAD and self._client is not None:
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
            and not self._upstream_dead
            and up is not None
            and not up.writing_paused
            and not (self._client is not None and self._client.writing_paused)
            # with idle timeouts the task keeps the time: it sees every message
            and not (self.cfg.idle_session_timeout or self.cfg.idle_in_transaction_timeout)
        )

    def _relay_ready_events(self, read: bytes | None = None) -> bool:
        """Relay the complete messages buffered while they only go upstream; True when all
        were, False when one is left in ``_stash`` for the task. ``read``: this read's bytes
        when they start a message, to be remembered by ``_remember`` if relayed whole."""
        before = self._clean_state() if read is not None and len(read) <= _MEMO_READ else None
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
                self._stash = (ev, self._frame)
                self._flush_client()  # what was answered before it
                return False
        if self._up_buf and self.upstream is not None:
            data = bytes(self._up_buf)
            self.upstream.write(data)
            self._up_buf.clear()
            if binds is not None and before is not None and data == read and not self._out:
                self._remember(data, before, tuple(binds))
        self._flush_client()  # the local answers of this read, in one write
        return True

    # A client read of Bind, Execute and Sync messages that was relayed whole from a clean
    # state (nothing owed, no batch open, no portal answered here) leaves the same state
    # every time it comes in that state while its Binds' statements are still relayed: the
    # route of those messages depends on nothing else (``_handle_now``). Clients repeat
    # such reads for every execution of a prepared statement (asyncpg, psycopg's prepared
    # statements, JDBC), so the session remembers, by the read's bytes, the state it came
    # in and the state it left, and relays a repeat as it came without decoding it again.
    # (Relaying to the backend is never a privacy question: the passthrough role reads no
    # protected table. What this must keep exact is the protocol state.)

    def _clean_state(self) -> ConnState | None:
        """The connection's state when the session is clean (see above), else None."""
        conn, state = self.conn, self.conn.state
        if (
            (state is ConnState.READY or state is ConnState.IN_TRANSACTION)
            and not self.pending
            and not self.portals
            and not conn.batch_open
            and conn.pending_ready == 0
            and not self.upstream_open
        ):
            return state
        return None

    def _remember(self, data: bytes, before: ConnState, binds: tuple[str, ...]) -> None:
        if any(
            not (e.forward and e.forward_ready) or e.sink or e.on_fail or e.failed
            for e in self.pending
        ):
            return
        if len(self._relayed) >= _MEMO_READS:
            self._relayed.clear()
        self._relayed[(before, data)] = _Relayed(
            binds=binds,
            kinds=tuple(e.kind for e in self.pending),
            state=self.conn.state,
            pending_ready=self.conn.pending_ready,
            batch_open=self.conn.batch_open,
            upstream_open=self.upstream_open,
            need_flush=self.need_flush,
        )

    def _relay_known(self, data: bytes) -> bool:
        """Relay a remembered read as it came and leave the state it left before; False
        (nothing done) when it is not remembered or the session is not as it was then."""
        if not self._relayed:
            return False
        state = self._clean_state()
        known = self._relayed.get((state, data)) if state is not None else None
        if known is None or not self._fast_lane_open():
            return False
        for name in known.binds:
            stmt = self.statements.get(name)
            if stmt is not None and not isinstance(stmt.route, Relay):
                return False
        assert self.upstream is not None  # the fast lane is open
        self.upstream.write(data)
        conn = self.conn
        conn.state, conn.pending_ready, conn.batch_open = (
            known.state,
            known.pending_ready,
            known.batch_open,
        )
        self.upstream_open, self.need_flush = known.upstream_open, known.need_flush
        self.idle.clear()
        self.pending.extend(Expect(kind) for kind in known.kinds)
        return True

    async def _wait_client(self) -> None:
        """Park until the client's next read; when the session is idle (nothing owed by the
        backend, the client owes the next message) the idle timeouts apply. The session may
        become idle while we wait (the backend answers the last Sync), so re-evaluate then."""
        loop = asyncio.get_running_loop()
        self._parked = True
        if self._reading_paused and self._client is not None:
            self._reading_paused = False
            self._client.resume_reading()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiter = fut
        try:
            timed = self.cfg.idle_session_timeout or self.cfg.idle_in_transaction_timeout
            while not fut.done():
                timeout, err = self._idle_timeout() if timed else (None, None)
                if timeout:
                    done, _ = await asyncio.wait({fut}, timeout=timeout)
                    if not done:
                        assert err is not None
                        raise _IdleTimeout(err)
                elif timed and self.pending:
                    idle = asyncio.ensure_future(self.idle.wait())
                    both: set[asyncio.Future[object]] = {fut, idle}  # type: ignore[arg-type]
                    try:
                        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        idle.cancel()
                else:
                    await fut
        finally:
            self._parked = False
            self._waiter = None

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
            if self._up_buf and self.upstream is not None and not self._upstream_dead:
                await self._flush_up()
                continue  # input may have come meanwhile: look again before parking
            await self._wait_client()

    @property
    def idle_reading(self) -> bool:
        """Waiting for the client with nothing in flight (shutdown may end it now)."""
        return self._parked and self._is_idle()

    # ---------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        try:
            if await self._startup():
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
                err = render_unexpected(e, where="session")
                fatal = ErrorResponse(
                    fields=tuple((c, "FATAL" if c in "SV" else v) for c, v in err.fields)
                )
                await asyncio.wait_for(self._write(fatal), 2.0)
        finally:
            await self._close()

    async def _close(self) -> None:
        self.conn.close()
        self.server.leave_pending(self)
        if self.registered:
            self.server.unregister(self)
            self.registered = False
        self._upstream_dead = True  # our own close: nothing more to relay or report
        if self.upstream is not None:
            with contextlib.suppress(Exception):
                await self.upstream.close()
        with contextlib.suppress(Exception):
            self._flush_client()
        await Channel.close_stream(self.writer, self._client)
        if self._held_big:
            # What the session kept of big statements (prepared ones hold their text and
            # classification) goes now: give the memory back to the system (proxy.wire.heap).
            self.statements.clear()
            self.portals.clear()
            trim_heap()

    # ---------------------------------------------------------------- start-up

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

    async def refuse(self, err: LaprasError) -> None:
        """Refuse the connection at once with a FATAL, before reading anything (the client
        reads it after sending its first packet, as it reads the postmaster's when PostgreSQL
        cannot start a backend)."""
        try:
            await self._fatal(err)
        finally:
            await self._close()

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
        except _LoginFailed as failed:
            self._failure = failed.error
            delay = self.server.login_failed(self)
            if delay > 0:
                # auth_delay: held back, and held as a pending login, for the whole delay even
                # if the client has left (see proxy.wire.admission for why).
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
                if ctx is not None:
                    self.writer.write(self.conn.send_ssl_answer(True))
                    await self.writer.drain()
                    self._handshaking = True
                    await self.writer.start_tls(ctx)
                    self._handshaking = False
                else:
                    self.writer.write(self.conn.send_ssl_answer(False))
                    await self.writer.drain()
                continue
            if isinstance(ev, GSSENCRequest):
                self.writer.write(self.conn.send_ssl_answer(False))
                await self.writer.drain()
                continue
            if isinstance(ev, CancelRequest):
                await self.server.cancel(ev.pid, ev.key)
                return None
            if isinstance(ev, StartupMessage):
                return ev
            raise ProtocolViolation("unexpected message before startup")

    async def _authenticate(self, startup: StartupMessage) -> bool:
        """The authentication exchange; False when the client leaves it. A failure raises
        _LoginFailed (answered later, see _startup)."""
        user = startup.get("user") or ""
        if not user:
            raise InvalidAuthorization("no PostgreSQL user name specified in startup packet")
        repl = (startup.get("replication") or "").lower()
        if repl and repl not in ("false", "off", "no", "0"):
            raise StartupFeatureNotSupported(
                "replication connections are not supported by the LAPRAS proxy"
            )
        self.user = user
        self.database = startup.get("database") or user
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
            raise _LoginFailed(e) from None
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
        try:
            up_db = self.cfg.upstream_database or startup.get("database")
            self.upstream = await UpstreamConnection.connect(upstream, params, database=up_db)
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
        except UpstreamUnavailable as e:
            await self._fatal(e)
            return False
        self.database = up_db or upstream.database
        up = self.upstream
        for ps in up.parameters:
            self.params[ps.name] = ps.value
            self._send(ps)
        for n in up.notices:
            self._send(n)
        self._send(BackendKeyData(pid=self.pid, key=self.key))
        self._send(ReadyForQuery(status="I"))
        self._flush_client()
        await self.writer.drain()
        up.start_relay(self._on_frames, self._on_upstream_lost, self._on_backend_read)
        self._client = Channel.take_over(
            self.reader, self.writer, self._on_client_data, self._on_client_lost
        )
        self._client_write = self._client.transport.write  # TLS, if any, is set up by now
        return True

    # ---------------------------------------------------------------- query loop

    def _idle_timeout(self) -> tuple[float | None, LaprasError | None]:
        if (
            self.pending
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
            if self._upstream_dead:
                return
            await self._dispatch(ev)
            del ev
            if len(self._frame) > _MEMO_READ:
                # A big message (up to max_message_size when refused by size) is not kept
                # while the session waits for the next one.
                self._held_big |= len(self._frame) > _ROUTE_IN_TASK
                self._frame = self.conn.last_frame = b""
                self._routed = None
            if self.conn.state is ConnState.CLOSED:
                return

    def _is_idle(self) -> bool:
        return (
            not self.pending
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
        idle = not self.pending
        if isinstance(ev, Query):
            if len(ev.sql) > _ROUTE_IN_TASK or self._too_long(ev.sql) is not None:
                return False  # refused, or its statements routed one at a time (_simple_query)
            stmts = split_statements(ev.sql)
            return self._relay_query(
                stmts, [self._route_now(self._info(s, "simple")) for s in stmts]
            )
        if isinstance(ev, Parse):
            if self._too_long(ev.sql) is not None:
                return False
            existing = self.statements.get(ev.name)
            if ev.name and (
                (existing is not None and not isinstance(existing.route, Relay))
                or ev.name in self.local.prepared
            ):
                return False
            info = self._info(ev.sql, "extended", ev.name, ev.param_oids)
            route = self._route_now(info)
            if isinstance(route, Relay):
                if self._intercepted(ev.sql) is not None:
                    return False
                self._relay_parse(ev, info, route, existing)
                return True
            if route is None or not idle or (ev.name and existing is not None):
                return False
            if ev.name == "":
                self.statements.pop("", None)
            return self._prepare_local(ev, info, route)
        if isinstance(ev, Bind):
            stmt = self.statements.get(ev.statement)
            if stmt is None or isinstance(stmt.route, Relay):
                self.portals.pop(ev.portal, None)
                self._forward(self._frame, Kind.BIND)
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
                self._forward(self._frame, Kind.EXECUTE)
                return True
            if (
                not idle
                or self.status == "E"
                or portal.done
                or _result_format_error(portal) is not None
            ):
                return False
            if portal.rows is None and not self._execute_now(portal, ev):
                return False
            self._send_rows(portal, ev)
        elif isinstance(ev, Describe):
            if ev.kind == "S":
                stmt = self.statements.get(ev.name)
                if stmt is None or isinstance(stmt.route, Relay):
                    self._forward(self._frame, Kind.DESCRIBE_S)
                    return True
            elif ev.name not in self.portals and ev.name not in self.local.cursors:
                self._forward(self._frame, Kind.DESCRIBE_P)
                return True
            if not idle or (self.status == "E" and ev.name not in self.portals):
                return False
            self._describe_local(ev)
        elif isinstance(ev, Close):
            if ev.kind == "S":
                stmt = self.statements.get(ev.name)
                if stmt is None or isinstance(stmt.route, Relay):
                    self.statements.pop(ev.name, None)
                    self._forward(self._frame, Kind.CLOSE)
                    return True
            elif ev.name not in self.portals and ev.name not in self.local.cursors:
                self._forward(self._frame, Kind.CLOSE)
                return True
            if not idle:
                return False
            self._close_local(ev)
        elif isinstance(ev, Sync):
            if self.upstream_open or not idle:
                self._forward(self._frame, Kind.SYNC)
                self.upstream_open = False
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
            await self._simple_query(ev.sql)
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
        if self.copy_in:
            if end:
                self.copy_in = False
            self._up(self._frame)
        # else: PostgreSQL ignores stray copy messages (postgres.c, 'c'/'d'/'f').

    async def _function_call(self) -> None:
        if await self._settle():
            self.conn.pending_ready = max(self.conn.pending_ready - 1, 0)
            return
        # protocol-flow "Function Call": answered like a simple Query, so the error is
        # followed by ReadyForQuery (and fails an open transaction, as any error does).
        err = FeatureNotSupported(
            "the function call protocol message is not supported by the LAPRAS proxy",
            hint="call the function in a SELECT statement instead",
        )
        await self._refuse(err, extended=False)
        await self._ready()

    # ---------------------------------------------------------------- malformed messages
    # PostgreSQL reads a message's content field by field (pq_getmsg*, pqformat.c) and answers
    # what does not read as an ERROR, never FATAL: 08P01 "insufficient data left in message",
    # "invalid string in message", "invalid message format" (bytes left over), or the first
    # check of the message that fails before (a Bind's unknown statement, 26000; its parameter
    # count, 08P01). The session stays; after an extended-query message the backend skips to
    # Sync (protocol-flow, "Extended Query"; protocol-message-formats for the layouts).

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
        self._forward(ev.frame, kind)
        if kind is Kind.SYNC:
            # A Sync with a body still ends the batch: the backend stops skipping, answers
            # ERROR "invalid message format" and then ReadyForQuery, with its own status.
            self.upstream_open = False
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
                    self.conn.pending_ready = max(self.conn.pending_ready - 1, 0)
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

    # ---------------------------------------------------------------- upstream relay

    def _up(self, data: bytes) -> None:
        # Buffered: what the client pipelined goes upstream in one write (one wake-up of the
        # backend), flushed before we wait for anything (client input or backend replies).
        if self._upstream_dead:
            raise SessionClosed
        self._up_buf += data

    async def _flush_up(self) -> None:
        if self._up_buf and self.upstream is not None and not self._upstream_dead:
            data = bytes(self._up_buf)
            self._up_buf.clear()
            self.upstream.write(data)
            await self.upstream.drain()

    def _expect(self, e: Expect) -> Expect:
        if not self.pending:
            self.idle.clear()  # set only while nothing is pending
        self.pending.append(e)
        return e

    def _forward(
        self,
        data: bytes,
        kind: Kind,
        *,
        forward: bool = True,
        forward_ready: bool = True,
        sink: list[BackendMessage] | None = None,
        on_fail: Callable[[], None] | None = None,
    ) -> Expect:
        if self.conn.state is _SKIP_UNTIL_SYNC and forward and kind is not Kind.SYNC:
            # An error arrived while this client message was being routed: the backend would
            # skip it, and so do we (no expectation, nothing sent).
            if kind in (Kind.QUERY, Kind.FUNCTION):
                self.conn.pending_ready = max(self.conn.pending_ready - 1, 0)
            return Expect(kind, failed=True)
        self._up(data)
        if kind in _EXTENDED_KINDS:
            self.upstream_open = True
            self.need_flush = True
        else:
            self.need_flush = False
        e = Expect(kind, forward, forward_ready, sink, on_fail)
        # _expect, inline (once per relayed message)
        if not self.pending:
            self.idle.clear()
        self.pending.append(e)
        return e

    async def _quiesce(self) -> None:
        """Wait until the backend has answered everything forwarded so far."""
        if self.pending and self.need_flush:
            self._up(Flush().encode())
            self.need_flush = False
        await self._flush_up()
        if self.pending:
            await self.idle.wait()
        if self._upstream_dead:
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
        if self._upstream_dead:
            return
        key, self._reply_key = self._reply_key, None
        before = list(self.pending) if key is not None and not self._out else None
        pending, out = self.pending, self._out
        # while a cursor made here depends on how the transaction ends, command tags too
        tracked = _TRACKED_TAGS if self.local.watching else _TRACKED
        try:
            for frame in frames:
                tb = frame[0]
                if pending and tb not in tracked and pending[0].forward:
                    # The common case, inline: a reply to relay as it came (rows,
                    # completions, descriptions), maybe completing its expectation.
                    out += frame
                    if tb in _COMPLETES[pending[0].kind]:
                        pending.popleft()
                    continue
                self._on_upstream(frame)
            if before is not None and key is not None:
                self._remember_reply(key, before, frames)
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
        if not self.pending:
            self.idle.set()
        if self._client is not None and self._client.writing_paused:
            # The client reads slower than the backend writes: stop reading the backend
            # until the client has caught up (what awaiting drain() did in a read loop).
            assert self.upstream is not None
            self.upstream.pause_reading()
            self.server.keep(asyncio.create_task(self._resume_upstream()))

    # The backend's side of the same memory (see _relay_known): a read that completes every
    # expectation, with rows and completions relayed as they came and a ReadyForQuery last,
    # leaves the same state each time it comes for the same expectations in the same state
    # (``_on_frames``, ``_on_upstream``). A repeated query's replies are such reads.

    def _reply_state(self, data: bytes) -> tuple[object, ...] | None:
        """The key of a backend read: what it may answer and the state it comes in; None
        when an expectation is not relayed to the client or a portal is answered here."""
        if not self.pending or self.portals or len(data) > _MEMO_READ or self.local.watching:
            return None
        kinds = []
        for e in self.pending:
            # (an on_fail callback is never called by such a read: it has no error, and it
            # is only remembered if no expectation was skipped -- see _remember_reply)
            if not (e.forward and e.forward_ready) or e.sink is not None:
                return None
            kinds.append(e.kind)
        conn = self.conn
        return (tuple(kinds), conn.state, conn.txn_status, conn.pending_ready, self.status, data)

    def _remember_reply(
        self, key: tuple[object, ...], before: list[Expect], frames: list[bytes]
    ) -> None:
        if (
            self.pending
            or frames[-1][0] != _Z
            or any(f[0] in _TRACKED for f in frames[:-1])
            or any(e.failed for e in before)
            or self._out != key[-1]
        ):
            return
        if len(self._replies) >= _MEMO_READS:
            self._replies.clear()
        conn = self.conn
        self._replies[key] = _Replied(conn.state, conn.txn_status, conn.pending_ready, self.status)

    def _on_backend_read(self, data: bytes) -> bool:
        """Relay a remembered backend read as it came and leave the state it left before;
        False (nothing done) when it is not remembered for this state."""
        if self._upstream_dead:
            return False
        key = self._reply_state(data)
        known = self._replies.get(key) if key is not None else None
        if known is None:
            self._reply_key = key  # for _on_frames to remember
            return False
        conn = self.conn
        conn.state, conn.txn_status, conn.pending_ready = (
            known.state,
            known.txn_status,
            known.pending_ready,
        )
        self.status = known.status
        self.pending.clear()
        self.upstream_open = False
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
        if self.upstream is not None and not self._upstream_dead:
            self.upstream.resume_reading()

    def _on_upstream_lost(self, e: BaseException) -> None:
        if not self._upstream_dead:
            self._upstream_gone(e)

    def _upstream_gone(self, e: BaseException) -> None:
        self._upstream_dead = True
        log.info("session %d: upstream connection lost: %s", self.pid, e)
        if self.conn.state is not ConnState.CLOSED:
            with contextlib.suppress(Exception):
                self._send(
                    render_error(
                        UpstreamUnavailable(
                            "terminating connection because the upstream server closed it"
                        )
                    )
                )
                self._flush_client()
        self.idle.set()
        self.writer.close()

    def _query_skipped(self) -> None:
        # A Query inside an extended batch that failed: the backend skips it, no
        # ReadyForQuery will answer it.
        self.conn.pending_ready = max(self.conn.pending_ready - 1, 0)

    def _skip_to_sync(self) -> None:
        """The backend skips everything up to the next Sync (protocol-flow "Extended Query"):
        the replies of those messages never come."""
        while self.pending and self.pending[0].kind is not Kind.SYNC:
            s = self.pending.popleft()
            s.failed = True
            if s.on_fail:
                s.on_fail()

    def _relay(self, frame: bytes) -> None:
        self._out += self.conn.relay(frame)

    def _on_upstream(self, frame: bytes) -> None:
        """One backend frame (type byte, length, body): relayed, kept for a hidden request
        or used to track the expectations and the transaction status."""
        tb = frame[0]
        e = self.pending[0] if self.pending else None
        if tb in b"NSA":  # asynchronous: NoticeResponse, ParameterStatus, Notification
            if tb == _S:
                ps = _decode(frame)
                assert isinstance(ps, ParameterStatus)
                self.params[ps.name] = ps.value
                self._relay(frame)
            elif e is not None and not e.forward:
                if e.sink is not None:
                    e.sink.append(_decode(frame))
            else:
                self._relay(frame)
            return
        if e is None:
            # Unsolicited (e.g. FATAL from pg_terminate_backend): pass it on.
            self._relay(frame)
            return
        if tb == _E:
            e.failed = True
            if e.forward:
                self._relay(frame)
            elif e.sink is not None:
                e.sink.append(_decode(frame))
            if e.kind in _EXTENDED_KINDS:
                # The backend now skips to Sync: the replies of skipped messages never come.
                self.pending.popleft()
                if e.on_fail:
                    e.on_fail()
                self._skip_to_sync()
                if e.forward and not self.pending:
                    # No Sync of the client's is on its way upstream: the rest of the
                    # client's batch must be discarded too.
                    self.conn.enter_skip()
            return
        if tb == _Z:
            before = self.status
            self.status = chr(frame[5]) if frame[5:6] in (b"I", b"T", b"E") else "I"
            if self.local.watching:
                self.local.saw_status(before, self.status)
            if e.kind not in _READY_KINDS:
                # Messages the backend skipped without our knowing: resynchronise on Sync.
                self._skip_to_sync()
                e = self.pending[0] if self.pending else e
            if e.kind in _READY_KINDS and self.pending and self.pending[0] is e:
                self.pending.popleft()
                if e.forward and e.forward_ready:
                    self._relay(frame)
            else:
                log.warning("session %d: unexpected ReadyForQuery from upstream", self.pid)
                self._relay(frame)
            if not self.pending:
                self.upstream_open = False
            if self.status == "I":
                self.portals.clear()
            return
        if tb in b"GW":
            self.copy_in = True
        elif tb == _C and self.local.watching:
            self.local.saw_tag(frame[5:-1])
        if e.forward:
            self._relay(frame)
        elif e.sink is not None:
            e.sink.append(_decode(frame))
        if tb in _COMPLETES[e.kind]:
            self.pending.popleft()

    # ---------------------------------------------------------------- helpers

    def _info(
        self, sql: str, protocol: str, name: str = "", oids: tuple[int, ...] = ()
    ) -> StatementInfo:
        app = self.params.get("application_name", "")
        si = self._session_info
        if si is None or si.txn_status != self.status or si.application_name != app:
            si = self._session_info = SessionInfo(
                user=self.user,
                database=self.database,
                application_name=app,
                session_pid=self.pid,
                txn_status=self.status,
            )
        return StatementInfo(
            sql=sql,
            protocol="simple" if protocol == "simple" else "extended",
            statement_name=name,
            param_oids=oids,
            session=si,
        )

    def _route_now(self, info: StatementInfo) -> Route | None:
        """The router's decision when it comes without waiting (a synchronous ``route``);
        None when the task must ask (an asynchronous router, or an error to report)."""
        try:
            r = self.server.router.route(info)
        except Exception:
            return None  # the task asks again and reports it
        if isinstance(r, Relay | Refuse | AnswerLocally):
            self._routed = (info, r)  # the task, taking over this statement, reuses it
            return r
        if inspect.iscoroutine(r):
            r.close()  # never started: nothing ran
        return None

    async def _route(self, info: StatementInfo) -> Route:
        routed, self._routed = self._routed, None
        if routed is not None and routed[0] == info:
            return routed[1]
        try:
            r = self.server.router.route(info)
            return r if isinstance(r, Relay | Refuse | AnswerLocally) else await r
        except LaprasError as e:
            return Refuse(e)
        except Exception as e:
            render_unexpected(e, where="router.route")
            return Refuse(LaprasError("internal error in the LAPRAS proxy; see the server log"))

    async def _ready(self) -> None:
        """Send ReadyForQuery with the backend's status (nothing is pending upstream)."""
        self._ready_now()
        self._flush_client()
        await self._drain()

    def _ready_now(self) -> None:
        self._send(ReadyForQuery(status=self.status))  # type: ignore[arg-type]
        if self.status == "I":
            self.portals.clear()

    async def _fail_upstream(self, extended: bool) -> None:
        """Make the backend's transaction (or open extended batch) fail like ours."""
        if extended:
            self._forward(
                Parse(name=_FAIL_STMT, sql=FAIL_SQL).encode(), Kind.PARSE, forward=False, sink=[]
            )
        else:
            self._forward(Query(sql=FAIL_SQL).encode(), Kind.QUERY, forward=False, sink=[])
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
        if self.status == "E":
            if checks_transaction:
                err = InFailedTransaction()
        elif self.status == "T" or (extended and self.upstream_open):
            await self._fail_upstream(extended)
        self._send(err if isinstance(err, ErrorResponse) else render_error(err))
        self._flush_client()

    async def _describe_upstream(
        self, sql: str, oids: tuple[int, ...], *, extended: bool
    ) -> Described | None:
        """The backend's Parse+Describe of ``sql`` in-band; on error the backend's error is
        sent to the client (it is the statement's error) and None returned."""
        await self._quiesce()
        sink: list[BackendMessage] = []
        data = (
            Parse(name=_DESCRIBE_STMT, sql=sql, param_oids=oids).encode()
            + Describe(kind="S", name=_DESCRIBE_STMT).encode()
            + Close(kind="S", name=_DESCRIBE_STMT).encode()
        )
        self._forward(data, Kind.PARSE, forward=False, sink=sink)
        self._expect(Expect(Kind.DESCRIBE_S, forward=False, sink=sink))
        self._expect(Expect(Kind.CLOSE, forward=False, sink=sink))
        if not extended:
            self._forward(Sync().encode(), Kind.SYNC, forward=False, sink=sink)
        await self._quiesce()
        params: tuple[int, ...] = oids
        fields: tuple[FieldDescription, ...] | None = None
        for m in sink:
            if isinstance(m, ErrorResponse):
                self._send(m)
                self._flush_client()
                return None
            if isinstance(m, ParameterDescription):
                params = m.oids
            elif isinstance(m, RowDescription):
                fields = m.fields
            elif isinstance(m, NoticeResponse):
                self._send(m)
        return Described(param_oids=params, fields=fields)

    def _fields(self, stmt: Statement) -> tuple[FieldDescription, ...] | None:
        r = stmt.route
        if isinstance(r, AnswerLocally) and r.wrapper is not None:
            return ()  # COPY, DECLARE, PREPARE: no result rows of their own (NoData)
        if isinstance(r, AnswerLocally) and r.columns is not None:
            return tuple(field_from_column(c) for c in r.columns)
        if stmt.described is not None:
            return stmt.described.fields
        return None

    async def _run_local(self, execution: Execution) -> LocalResult:
        """Call the router's execute(), cancellable (CancelRequest) and timed."""
        route = execution.route
        if route.result is not None:
            return route.result
        task = asyncio.ensure_future(self.server.router.execute(execution))
        self._local_task = task
        try:
            if not self.cfg.statement_timeout:
                try:
                    return await task
                except asyncio.CancelledError:
                    me = asyncio.current_task()
                    if me is not None and me.cancelling():
                        raise  # the session itself is being stopped
                    raise QueryCanceled("canceling statement due to user request") from None
            done, _ = await asyncio.wait({task}, timeout=self.cfg.statement_timeout)
        finally:
            self._local_task = None
        if not done:
            task.cancel()
            raise QueryCanceled("canceling statement due to statement timeout")
        if task.cancelled():
            raise QueryCanceled("canceling statement due to user request")
        return task.result()

    def _encode_rows(
        self, result: LocalResult, fields: tuple[FieldDescription, ...]
    ) -> list[tuple[bytes | None, ...]]:
        out: list[tuple[bytes | None, ...]] = []
        for row in result.rows:
            if len(row) != len(fields):
                raise ValueError(f"row has {len(row)} cells, result has {len(fields)} columns")
            cells: list[bytes | None] = []
            for f, v in zip(fields, row, strict=True):
                if isinstance(v, EncodedCell):
                    c = v.binary if f.format == 1 else v.text
                    if c is None:
                        raise ValueError("encoded cell lacks the requested format")
                    cells.append(c)
                else:
                    cells.append(pgtypes.encode(f.type_oid, v, f.format))
            out.append(tuple(cells))
        return out

    @staticmethod
    def _notices(result: LocalResult) -> list[NoticeResponse]:
        out = []
        for n in result.notices:
            fs = [("S", n.severity), ("V", n.severity), ("C", n.sqlstate), ("M", n.message)]
            if n.detail:
                fs.append(("D", n.detail))
            if n.hint:
                fs.append(("H", n.hint))
            out.append(NoticeResponse(fields=tuple(fs)))
        return out

    async def _local_result(
        self, execution: Execution, *, extended: bool
    ) -> tuple[list[tuple[bytes | None, ...]], str, list[NoticeResponse]] | None:
        """Run a local answer; on error answer it as PostgreSQL would and return None."""
        result = await self._local_answer(execution, extended=extended)
        if result is None:
            return None
        try:
            rows = self._encode_rows(result, execution.fields)
        except Exception as e:
            await self._refuse(render_unexpected(e, where="router.execute"), extended=extended)
            return None
        return rows, result.command_tag or "", self._notices(result)

    async def _local_answer(self, execution: Execution, *, extended: bool) -> LocalResult | None:
        """The router's answer; on error answer it as PostgreSQL would and return None."""
        try:
            return await self._run_local(execution)
        except LaprasError as e:
            await self._refuse(e, extended=extended)
            return None
        except Exception as e:
            await self._refuse(render_unexpected(e, where="router.execute"), extended=extended)
            return None

    # ---------------------------------------------------------------- simple query

    def _on_simple_statement(self, sql: str) -> None:
        """What a relayed statement does to what the session holds (statements, portals,
        and the cursors and statements answered here: DEALLOCATE ALL, DISCARD ALL, CLOSE
        ALL are relayed for the backend's own and drop the local ones)."""
        reset = _RESET_ALL.match(sql)
        if reset:
            self.statements.clear()
            self.portals.clear()
            if self.status != "E":
                self.local.prepared.clear()
            if reset.group(1).upper().startswith("DISCARD") and self.status == "I":
                self.local.discard_all()  # (DISCARD ALL is refused in a transaction block)
            return
        if _CLOSE_ALL.match(sql):
            if self.status != "E":
                self.local.close_all()
                self.portals.clear()
            return
        m = _DEALLOCATE.match(sql)
        if m:
            self.statements.pop(m.group(2) if m.group(1) else m.group(2).lower(), None)

    def _relay_query(self, stmts: list[str], routes: Sequence[Route | None]) -> bool:
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
        data = self._frame  # the client's Query, as it came
        if any(r.sql is not None for r in relays):
            sql = ";\n".join(r.sql or s for s, r in zip(stmts, relays, strict=True))
            data = Query(sql=sql).encode()
        self._forward(data, Kind.QUERY, on_fail=self._query_skipped)
        return True

    def _too_long(self, sql: str) -> StatementTooLong | None:
        """The refusal of SQL text longer than ``max_statement_size`` bytes; None if it fits."""
        limit = self.cfg.max_statement_size
        if len(sql) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character
            return None
        size = len(sql) if sql.isascii() else len(sql.encode())
        return StatementTooLong(size, limit) if size > limit else None

    async def _simple_query(self, sql: str) -> None:
        """protocol-flow "Simple Query", statement by statement when the router must."""
        too_long = self._too_long(sql)
        if too_long is not None:  # refused before anything is split, routed or parsed
            if await self._settle():
                self.conn.pending_ready = max(self.conn.pending_ready - 1, 0)
                return
            # (also in a failed transaction: PostgreSQL reads a statement before it looks
            # at the transaction)
            await self._refuse(too_long, extended=False, checks_transaction=False)
            await self._ready()
            return
        stmts = split_statements(sql)
        routes: list[Route] = []
        for s in stmts:
            routes.append(await self._route(self._info(s, "simple")))
            if len(sql) > _ROUTE_IN_TASK:
                # A long Query may hold many statements the router decides at once, each
                # taking a while: the loop serves the other sessions between them.
                await asyncio.sleep(0)
        if self._relay_query(stmts, routes):
            return
        # A simple Query destroys the unnamed statement and portal (protocol-flow).
        self.statements.pop("", None)
        self.portals.pop("", None)
        if await self._settle():
            self.conn.pending_ready = max(self.conn.pending_ready - 1, 0)
            return
        # Several statements in one Query run as one implicit transaction (protocol-flow
        # "Multiple Statements in a Simple Query"). Relayed one by one they would not, so
        # wrap them in a hidden BEGIN ... COMMIT/ROLLBACK unless they manage transactions
        # themselves.
        wrap = (
            self.status == "I" and len(stmts) > 1 and not any(_TXN_CONTROL.match(s) for s in stmts)
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
                e = self._forward(Query(sql=r.sql or s).encode(), Kind.QUERY, forward_ready=False)
                await self._quiesce()
                ok = not e.failed
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

    async def _hidden_query(self, sql: str) -> list[BackendMessage]:
        sink: list[BackendMessage] = []
        self._forward(Query(sql=sql).encode(), Kind.QUERY, forward=False, sink=sink)
        await self._quiesce()
        return sink

    def _simple_execution(
        self, sql: str, route: AnswerLocally, fields: tuple[FieldDescription, ...]
    ) -> Execution:
        """A simple-protocol statement's execution: no parameters, text results."""
        return Execution(
            statement=self._info(sql, "simple"),
            route=route,
            param_oids=(),
            params=(),
            raw_params=(),
            param_formats=(),
            fields=fields,
        )

    async def _simple_local(self, sql: str, route: AnswerLocally) -> bool:
        if self.status == "E":
            self._send(render_error(InFailedTransaction()))
            return False
        if route.wrapper is not None:
            msgs = await self._wrapped_answer(
                self._simple_execution(sql, route, ()), extended=False
            )
            if msgs is None:
                return False
            for msg in msgs:
                self._send(msg)
            self._flush_client()
            return True
        stmt = Statement(sql=sql, route=route, param_oids=())
        if route.describe_upstream:
            d = await self._describe_upstream(sql, (), extended=False)
            if d is None:
                return False
            stmt.described = d
        fields = self._fields(stmt) or ()
        res = await self._local_result(self._simple_execution(sql, route, fields), extended=False)
        if res is None:
            return False
        rows, tag, notices = res
        for n in notices:
            self._send(n)
        if fields:
            self._send(RowDescription(fields=fields))
        for row in rows:
            self._send(DataRow(values=row))
        self._send(CommandComplete(tag=tag or f"SELECT {len(rows)}"))
        self._flush_client()
        return True

    # ---------------------------------------------------------------- extended query

    async def _local_error(self, err: LaprasError) -> None:
        await self._refuse(err, extended=True)

    def _relay_parse(
        self, m: Parse, info: StatementInfo, route: Relay, existing: Statement | None
    ) -> None:
        frame = self._frame
        if route.sql is not None:
            m = Parse(name=m.name, sql=route.sql, param_oids=m.param_oids)
            frame = m.encode()
        stmt = Statement(sql=m.sql, route=route, param_oids=m.param_oids, info=info)
        if m.name and existing is not None:
            self._forward(self._frame, Kind.PARSE)  # the backend answers 42P05
            return
        self.statements[m.name] = stmt

        def dropped(name: str = m.name, s: Statement = stmt) -> None:
            if self.statements.get(name) is s:
                del self.statements[name]

        self._forward(frame, Kind.PARSE, on_fail=dropped)

    def _prepare_local(
        self, m: Parse, info: StatementInfo, route: Route, command: Command | None = None
    ) -> bool:
        """Answer a Parse that needs nothing from the backend (a failed transaction, or a
        statement answered here whose columns the router gave); False otherwise."""
        if self.status == "E":
            self._send(render_error(InFailedTransaction()))
            return True
        if not isinstance(route, AnswerLocally) or route.describe_upstream:
            return False
        stmt = Statement(
            sql=m.sql, route=route, param_oids=m.param_oids, info=info, command=command
        )
        if route.param_oids is not None:
            # the router's types where the Parse left them 0; PREPARE's own are EXECUTE's
            own = () if isinstance(route.wrapper, PrepareAs) else route.param_oids
            stmt.described = Described(param_oids=_merged(m.param_oids, own), fields=None)
        self.statements[m.name] = stmt
        self._send(ParseComplete())
        return True

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
            await self._local_error(_dup_statement(m.name))
            return
        info = self._info(m.sql, "extended", m.name, m.param_oids)
        route = await self._route(info)
        command = None
        if isinstance(route, Relay):
            command = self._intercepted(m.sql)
            if command is None:
                self._relay_parse(m, info, route, existing)
                return
            route = self._command_route(command)
        if m.name and existing is not None:  # a relayed statement has the name
            await self._local_error(_dup_statement(m.name))
            return
        if m.name == "":
            self.statements.pop("", None)
        if await self._settle():
            return
        if self._prepare_local(m, info, route, command):
            self._flush_client()
            return
        stmt = Statement(
            sql=m.sql, route=route, param_oids=m.param_oids, info=info, command=command
        )
        # A refused statement is prepared as the backend prepares it (its Describe gives the
        # types, its errors -- a syntax error, an unknown column -- come now) and refused at
        # Bind: PostgreSQL checks privileges when a statement is bound, not when it is parsed,
        # and tools describe statements they never run.
        if isinstance(route, Refuse) or route.describe_upstream:
            d = await self._describe_upstream(m.sql, m.param_oids, extended=True)
            if d is None:
                return
            stmt.described = d
        self.statements[m.name] = stmt
        await self._write(ParseComplete())

    async def _bind(self, statement: str) -> None:
        """Bind to a statement answered here (``_handle_now`` relays the others); the Bind is
        ``self._frame``, well formed or not."""
        stmt = self.statements[statement]
        body = self._frame[5:]
        if await self._settle():
            return
        err = self._bind_portal(body, stmt)
        if err is not None:
            await self._refuse(err, extended=True, checks_transaction=False)
            return
        self._flush_client()
        await self._drain()

    def _bind_portal(self, body: bytes, stmt: Statement) -> LaprasError | None:
        """Make the portal of a Bind (``body``) to a statement answered here and send
        BindComplete; or return the error to answer (then nothing is sent).

        The body is read and checked in the order of PostgreSQL's exec_bind_message
        (postgres.c), so that a Bind gets the error PostgreSQL reports first, well formed or
        not: the parameter format and value counts, the failed transaction, the portal name;
        each parameter in turn (its bytes, its format code, its value); the result format
        codes, the end of the message; the privilege check (a refused statement: PortalStart);
        the result format count. Layout: protocol-message-formats, "Bind"."""
        r = PqReader(body)
        try:
            portal, name = r.string(), r.string()
            pfmts = tuple(r.int16() for _ in range(r.uint16()))
            n = r.uint16()
            if len(pfmts) > 1 and len(pfmts) != n:
                return ProtocolError(
                    f"bind message has {len(pfmts)} parameter formats but {n} parameters"
                )
            oids = stmt.described.param_oids if stmt.described else stmt.param_oids
            if n != len(oids):
                return ProtocolError(
                    f"bind message supplies {n} parameters, but prepared statement "
                    f'"{name}" requires {len(oids)}'
                )
            if self.status == "E":
                return InFailedTransaction()
            if portal and portal in self.portals:
                return DuplicateCursor(f'cursor "{portal}" already exists')
            # CreatePortal drops the unnamed portal it replaces, even if the Bind then fails.
            self.portals.pop(portal, None)
            decode = isinstance(stmt.route, AnswerLocally)  # a refused one is never run
            raws: list[bytes | None] = []
            fmts: list[int] = []
            values: list[object] = []
            for i, oid in enumerate(oids):
                length = r.int32()
                raw = None if length == -1 else r.take(length)
                f = pfmts[i] if len(pfmts) > 1 else pfmts[0] if pfmts else 0
                if f != 0 and f != 1:
                    return UnsupportedFormatCode(f"unsupported format code: {f}")
                if f == 1 and raw is not None:
                    err = _binary_length_error(oid, raw, i)
                    if err is not None:
                        return err
                if decode:
                    try:
                        values.append(pgtypes.decode(oid, raw, f))
                    except (ValueError, ArithmeticError, UnicodeDecodeError) as e:
                        return _bad_param(e)
                raws.append(raw)
                fmts.append(f)
            rfmts = tuple(r.int16() for _ in range(r.uint16()))
            r.end()
        except LaprasError as e:  # what PqReader raises, as PostgreSQL's pq_getmsg*
            return e
        if isinstance(stmt.route, Refuse):
            return stmt.route.error
        fields = self._fields(stmt) or ()
        formats = resolve_formats(rfmts, len(fields))
        if formats is None:
            return ProtocolError(
                f"bind message has {len(rfmts)} result formats but query has {len(fields)} columns"
            )
        self.portals[portal] = Portal(
            statement=stmt,
            params=tuple(values),
            raw_params=tuple(raws),
            param_formats=tuple(fmts),
            fields=tuple(f.with_format(fmt) for f, fmt in zip(fields, formats, strict=True)),
        )
        self._send(BindComplete())
        return None

    def _portal_gone(self, m: Describe | Execute | Close, frame: bytes, kind: Kind) -> bool:
        """True, and ``frame`` relayed for the backend to answer, when the portal ``m`` names
        was dropped while the session waited for the backend: a Sync before it ended the
        transaction, as PostgreSQL drops a transaction's portals (the backend then has no such
        portal either, and answers as PostgreSQL would)."""
        name = m.portal if isinstance(m, Execute) else m.name if m.kind == "P" else None
        if name is None or name in self.portals:
            return False
        if not isinstance(m, Execute) and name in self.local.cursors:
            return False  # a cursor answered here, described or closed by the protocol
        self._forward(frame, kind)
        return True

    async def _describe(self, m: Describe) -> None:
        """Describe a statement or portal answered here (``_handle_now`` relays the others)."""
        frame = self._frame
        if await self._settle():
            return
        if self._portal_gone(m, frame, Kind.DESCRIBE_P):
            return
        if m.kind == "P" and m.name not in self.portals and self.status == "E":
            # a cursor made here: its rows' description in a failed transaction is 25P02
            await self._local_error(InFailedTransaction())
            return
        self._describe_local(m)
        self._flush_client()
        await self._drain()

    def _describe_local(self, m: Describe) -> None:
        if m.kind == "S":
            stmt = self.statements[m.name]
            oids = stmt.described.param_oids if stmt.described else stmt.param_oids
            fields = self._fields(stmt)
            self._send(ParameterDescription(oids=oids))
            self._send(RowDescription(fields=fields) if fields else NoData())
        else:
            portal = self.portals.get(m.name)
            if portal is None:  # a cursor made here: its columns, in text (as PostgreSQL)
                cursor = self.local.cursors[m.name]
                self._send(RowDescription(fields=_cursor_fields(cursor, 0)))
                return
            self._send(RowDescription(fields=portal.fields) if portal.fields else NoData())

    async def _execute(self, m: Execute) -> None:
        """Execute a portal answered here (``_handle_now`` relays the others)."""
        frame = self._frame
        if await self._settle():
            return
        portal = self.portals.get(m.portal)
        if portal is None:
            self._portal_gone(m, frame, Kind.EXECUTE)
            return
        if self.status == "E":
            await self._local_error(InFailedTransaction())
            return
        err = _result_format_error(portal)
        if err is not None:
            await self._local_error(err)
            return
        if portal.done:
            await self._local_error(NotInPrerequisiteState(f'portal "{m.portal}" cannot be run'))
            return
        if portal.rows is None:
            stmt = portal.statement
            if stmt.command is not None or (
                isinstance(stmt.route, AnswerLocally) and stmt.route.wrapper is not None
            ):
                if not await self._execute_held(portal, m):
                    return
            else:
                res = await self._local_result(self._execution(portal, m), extended=True)
                if res is None:
                    return
                portal.rows, portal.tag, portal.notices = res
                for n in portal.notices:
                    self._send(n)
        self._send_rows(portal, m)
        self._flush_client()
        await self._drain()

    def _execution(self, portal: Portal, m: Execute) -> Execution:
        stmt = portal.statement
        assert isinstance(stmt.route, AnswerLocally)
        return Execution(
            statement=stmt.info or self._info(stmt.sql, "extended"),
            route=stmt.route,
            param_oids=stmt.described.param_oids if stmt.described else stmt.param_oids,
            params=portal.params,
            raw_params=portal.raw_params,
            param_formats=portal.param_formats,
            fields=portal.fields,
            max_rows=m.max_rows,
        )

    def _execute_now(self, portal: Portal, m: Execute) -> bool:
        """Make the rows of a portal answered here when the router has the answer at once
        (a stored answer); False when the task must run the execution."""
        route = portal.statement.route
        if (
            not isinstance(route, AnswerLocally)
            or route.wrapper is not None
            or portal.statement.command is not None
        ):
            return False  # the task answers wrappers and commands (_execute_held)
        execution = self._execution(portal, m)
        try:
            result = route.result or self.server.router.execute_now(execution)
            if result is None:
                return False
            portal.rows = self._encode_rows(result, execution.fields)
        except Exception:  # the task runs it again and reports what goes wrong
            return False
        portal.tag, portal.notices = result.command_tag or "", self._notices(result)
        for n in portal.notices:
            self._send(n)
        return True

    def _send_rows(self, portal: Portal, m: Execute) -> None:
        """The next rows of a portal answered here, and how the Execute ends."""
        rows = portal.rows
        assert rows is not None
        start = portal.sent
        end = len(rows) if m.max_rows <= 0 else min(len(rows), start + m.max_rows)
        for row in rows[start:end]:
            self._send(DataRow(values=row))
        portal.sent = end
        if m.max_rows > 0 and end - start == m.max_rows:
            # As PostgreSQL: max_rows fetched, the end is not known yet (protocol-flow,
            # "Extended Query": PortalSuspended).
            self._send(PortalSuspended())
        else:
            self._send(CommandComplete(tag=portal.tag or f"{portal.verb} {end - start}"))

    async def _close_msg(self, m: Close) -> None:
        """Close a statement or portal answered here (``_handle_now`` relays the others)."""
        frame = self._frame
        if await self._settle():
            return
        if self._portal_gone(m, frame, Kind.CLOSE):
            return
        self._close_local(m)
        self._flush_client()
        await self._drain()

    def _close_local(self, m: Close) -> None:
        if m.kind == "S":
            del self.statements[m.name]
        elif m.name in self.portals:
            del self.portals[m.name]
        else:
            self.local.close(m.name)  # a cursor made here, closed as a portal
        self._send(CloseComplete())

    async def _flush(self) -> None:
        if self.need_flush:
            self._up(Flush().encode())
            self.need_flush = False
        await self._flush_up()

    # ---------------------------------------------------------------- wrappers, cursors
    # A DP statement in COPY (...) TO STDOUT, DECLARE ... CURSOR FOR or PREPARE ... AS
    # (AnswerLocally.wrapper), and the commands addressing a cursor or statement the session
    # holds (FETCH, MOVE, CLOSE, EXECUTE, DEALLOCATE: Statement.command), on the simple and
    # the extended protocol alike. The cursors and SQL-prepared statements themselves are in
    # self.local (proxy.wire.local); every other such command is relayed untouched.

    def _intercepted(self, sql: str) -> Command | None:
        """The command ``sql`` is when it addresses what the session holds (or takes a name
        it holds, which PostgreSQL refuses); None: relay it."""
        if _COMMAND_VERB.match(sql) is None:
            return None
        cmd = wrappers.command(sql)
        if cmd is None or cmd.name is None:
            return None  # CLOSE ALL, DEALLOCATE ALL: relayed (_on_simple_statement)
        if isinstance(cmd, Fetch | CloseCursor | NamesCursor):
            return cmd if cmd.name in self.local.cursors else None
        if cmd.name in self.local.prepared or self._local_statement(cmd.name) is not None:
            return cmd
        return None

    def _local_statement(self, name: str) -> Statement | None:
        """The protocol-level statement ``name`` when it was prepared here (the backend has
        never seen it)."""
        stmt = self.statements.get(name) if name else None
        return stmt if stmt is not None and not isinstance(stmt.route, Relay) else None

    def _command_route(self, cmd: Command) -> Refuse | AnswerLocally:
        """The route of a Parse of a command answered here: its result columns."""
        if isinstance(cmd, NamesCursor):
            return Refuse(DuplicateCursor(f'cursor "{cmd.name}" already exists'))
        if isinstance(cmd, NamesStatement):
            return Refuse(_dup_statement(cmd.name))
        columns: tuple[Column, ...] = ()
        if isinstance(cmd, Fetch) and not cmd.move:
            columns = self.local.cursors[cmd.name].columns
        elif isinstance(cmd, ExecutePrepared):
            columns = self._prepared_columns(cmd.name)
        return AnswerLocally(columns=columns, describe_upstream=False)

    def _prepared_columns(self, name: str) -> tuple[Column, ...]:
        prep = self.local.prepared.get(name)
        if prep is not None:
            return prep.route.columns or ()
        stmt = self._local_statement(name)
        fields = self._fields(stmt) if stmt is not None else None
        return tuple(
            Column(
                name=f.name,
                type_oid=f.type_oid,
                type_modifier=f.type_modifier,
                table_oid=f.table_oid,
                column_attr=f.column_attr,
            )
            for f in fields or ()
        )

    async def _simple_command(self, cmd: Command) -> bool:
        if self.status == "E":
            self._send(render_error(InFailedTransaction()))
            return False
        res = await self._command_answer(cmd, extended=False)
        if res is None:
            return False
        pre, fields, rows, tag = res
        for msg in pre:
            self._send(msg)
        if fields is not None:
            self._send(RowDescription(fields=fields))
        for row in rows:
            self._send(DataRow(values=row))
        self._send(CommandComplete(tag=tag))
        self._flush_client()
        return True

    async def _execute_held(self, portal: Portal, m: Execute) -> bool:
        """The first Execute of a portal of a wrapper or a command answered here: send what
        comes before its rows, keep the rows and the tag in the portal; False when it was
        refused (answered already)."""
        stmt = portal.statement
        if stmt.command is not None:
            res = await self._command_answer(stmt.command, extended=True, portal=portal)
            if res is None:
                return False
            pre, fields, rows, tag = res
            if fields is not None:
                # FETCH and EXECUTE return rows, which Execute may page: each chunk's tag
                # counts its own rows (pquery.c, PortalRun of a PORTAL_UTIL_SELECT)
                portal.verb, tag = tag.split()[0], ""
        else:
            msgs = await self._wrapped_answer(self._execution(portal, m), extended=True)
            if msgs is None:
                return False
            done = msgs.pop()
            assert isinstance(done, CommandComplete)
            pre, rows, tag = msgs, [], done.tag
        for msg in pre:
            self._send(msg)
        portal.rows, portal.tag = rows, tag
        portal.done = bool(tag)
        return True

    async def _command_answer(
        self, cmd: Command, *, extended: bool, portal: Portal | None = None
    ) -> (
        tuple[
            list[BackendMessage],
            tuple[FieldDescription, ...] | None,
            list[tuple[bytes | None, ...]],
            str,
        ]
        | None
    ):
        """Answer a command addressing what the session holds: the messages before the
        rows, the columns (None: no RowDescription), the encoded rows and the command tag;
        None when it was refused (answered already, as PostgreSQL answers it)."""
        try:
            if isinstance(cmd, NamesCursor):
                raise DuplicateCursor(f'cursor "{cmd.name}" already exists')
            if isinstance(cmd, NamesStatement):
                raise _dup_statement(cmd.name)
            if isinstance(cmd, Fetch | CloseCursor):
                name = cmd.name or ""
                cursor = self.local.cursors.get(name)
                if cursor is None:
                    raise UndefinedCursor(f'cursor "{name}" does not exist')
                if isinstance(cmd, CloseCursor):
                    self.local.close(name)
                    return [], None, [], "CLOSE CURSOR"
                rows, n = cursor.fetch(cmd)
                if cmd.move:
                    return [], None, [], f"MOVE {n}"
                fields = _cursor_fields(cursor, 1 if cursor.binary else 0)
                if portal is not None and len(portal.fields) == len(fields):
                    fields = portal.fields  # the formats of the FETCH's own Bind
                encoded = self._encode_rows(LocalResult(rows=tuple(rows)), fields)
                return [], fields, encoded, f"FETCH {n}"
            name = cmd.name or ""
            if isinstance(cmd, Deallocate):
                if self.local.prepared.pop(name, None) is None:
                    if self._local_statement(name) is None:
                        raise InvalidStatementName(f'prepared statement "{name}" does not exist')
                    del self.statements[name]  # prepared by the protocol, answered here
                return [], None, [], "DEALLOCATE"
            execution = self._execute_prepared(cmd, portal)
        except LaprasError as e:
            await self._refuse(e, extended=extended)
            return None
        except Exception as e:
            await self._refuse(render_unexpected(e, where="local command"), extended=extended)
            return None
        if isinstance(execution, LaprasError):
            await self._refuse(execution, extended=extended)
            return None
        res = await self._local_result(execution, extended=extended)
        if res is None:
            return None
        rows_, tag, notices = res
        return list(notices), execution.fields, rows_, tag or f"SELECT {len(rows_)}"

    def _execute_prepared(self, cmd: Command, portal: Portal | None) -> Execution | LaprasError:
        """The execution ``EXECUTE name (args)`` asks for, or its error (PostgreSQL's: a
        wrong number of arguments, a value its type does not read)."""
        assert isinstance(cmd, ExecutePrepared)
        prep = self.local.prepared.get(cmd.name)
        if prep is not None:
            route, info, oids = prep.route, prep.info, prep.param_oids
            own = len(route.param_oids or ())
        else:
            stmt = self._local_statement(cmd.name)
            if stmt is None:
                return InvalidStatementName(f'prepared statement "{cmd.name}" does not exist')
            if not isinstance(stmt.route, AnswerLocally) or stmt.command is not None:
                if isinstance(stmt.route, Refuse):
                    return stmt.route.error
                return FeatureNotSupported(
                    f'EXECUTE of prepared statement "{cmd.name}" is not supported',
                    hint="execute it with the protocol's Bind and Execute",
                )
            if stmt.route.wrapper is not None:
                return FeatureNotSupported(
                    f'EXECUTE of prepared statement "{cmd.name}" is not supported',
                    hint="execute it with the protocol's Bind and Execute",
                )
            route, info = stmt.route, stmt.info or self._info(stmt.sql, "extended")
            oids = stmt.described.param_oids if stmt.described else stmt.param_oids
            own = len(oids)
        if cmd.args is None:
            return FeatureNotSupported(
                "only constants are accepted as EXECUTE parameters of a statement answered "
                "by the proxy",
                hint="write each parameter as a literal, e.g. EXECUTE p(30, 'Male')",
            )
        args: tuple[str | None, ...] = cmd.args if oids else ()
        if len(args) != len(oids):
            return SqlSyntaxError(
                f'wrong number of parameters for prepared statement "{cmd.name}"',
                detail=f"Expected {len(oids)} parameters but got {len(args)}.",
            )
        params: list[object] = []
        for oid, arg in zip(oids, args, strict=True):
            try:
                params.append(pgtypes.decode(oid, None if arg is None else arg.encode(), 0))
            except (ValueError, ArithmeticError, UnicodeDecodeError):
                return InvalidParameterValue(
                    f'invalid input syntax for type {_TYPE_NAMES.get(oid, "of the parameter")}: "{arg}"'
                )
        columns = route.columns
        if columns is None:
            stmt = self._local_statement(cmd.name)
            columns = self._prepared_columns(cmd.name) if stmt is not None else ()
        fields = tuple(field_from_column(c) for c in columns)
        if portal is not None and len(portal.fields) == len(fields):
            fields = portal.fields
        return Execution(
            statement=info,
            route=route,
            param_oids=oids[:own],
            params=tuple(params[:own]),
            raw_params=tuple(None if a is None else a.encode() for a in args[:own]),
            param_formats=(0,) * min(own, len(args)),
            fields=fields,
        )

    async def _wrapped_answer(
        self, execution: Execution, *, extended: bool
    ) -> list[BackendMessage] | None:
        """The answer of a DP statement in its wrapper, as the messages to send (the last
        a CommandComplete), or None when it was refused (answered already). Every check that
        can fail comes before the answer is made: for a cursor, the transaction block and
        the name (here and on the backend)."""
        route = execution.route
        w = route.wrapper
        columns = route.columns or ()
        if isinstance(w, PrepareAs):
            return await self._prepare_sql(execution, w, extended=extended)
        if isinstance(w, DeclareCursor):
            err: LaprasError | None = None
            if not w.hold and self.status == "I":
                err = NoActiveTransaction("DECLARE CURSOR can only be used in transaction blocks")
            elif w.name in self.local.cursors or w.name in self.portals:
                err = DuplicateCursor(f'cursor "{w.name}" already exists')
            else:
                taken = await self._hidden_row(_CURSOR_TAKEN, (w.name,), extended=extended)
                if taken is None:
                    return None
                if taken[:1] == (b"t",):
                    err = DuplicateCursor(f'cursor "{w.name}" already exists')
            if err is not None:
                await self._refuse(err, extended=extended)
                return None
        result = await self._local_answer(execution, extended=extended)
        if result is None:
            return None
        out: list[BackendMessage] = list(self._notices(result))
        if isinstance(w, DeclareCursor):
            self.local.add_cursor(
                Cursor(
                    name=w.name,
                    columns=columns,
                    rows=result.rows,
                    binary=w.binary,
                    no_scroll=w.scroll is False,
                    hold=w.hold,
                    pending=self.status != "I",
                )
            )
            out.append(CommandComplete(tag="DECLARE CURSOR"))
            return out
        assert isinstance(w, CopyTo)
        try:
            data = copy_data(
                w, [c.name for c in columns], [c.type_oid for c in columns], result.rows
            )
        except Exception as e:  # a bug: the answer is made, its encoding failed
            await self._refuse(render_unexpected(e, where="COPY"), extended=extended)
            return None
        out.append(copy_response(w, len(columns)))
        out.extend(CopyData(data=d) for d in data)
        out.append(CopyDone())
        out.append(CommandComplete(tag=f"COPY {len(result.rows)}"))
        return out

    async def _prepare_sql(
        self, execution: Execution, w: PrepareAs, *, extended: bool
    ) -> list[BackendMessage] | None:
        """``PREPARE name [(types)] AS <DP statement>``: kept here for EXECUTE. The name
        must be free here and on the backend (one namespace with the protocol's statements);
        the declared types are the backend's own reading of them (regtype)."""
        name = w.name
        if name in self.local.prepared or name in self.statements:
            await self._refuse(_dup_statement(name), extended=extended)
            return None
        checks = ", ".join(
            f"${i + 2}::pg_catalog.regtype::pg_catalog.oid" for i in range(len(w.param_types))
        )
        sql = _STATEMENT_TAKEN + (f", {checks}" if checks else "")
        row = await self._hidden_row(sql, (name, *w.param_types), extended=extended)
        if row is None:
            return None
        if row[:1] == (b"t",):
            await self._refuse(_dup_statement(name), extended=extended)
            return None
        declared = tuple(int(v) if v is not None else 0 for v in row[1:])
        own = execution.route.param_oids or ()
        self.local.prepared[name] = Prepared(
            name=name,
            route=execution.route,
            info=execution.statement,
            param_oids=_merged(declared, own),
        )
        return [CommandComplete(tag="PREPARE")]

    async def _hidden_row(
        self, sql: str, params: tuple[str, ...], *, extended: bool
    ) -> tuple[bytes | None, ...] | None:
        """The first row of ``sql`` run on the backend in-band, unseen by the client (text
        parameters and results); None when it failed, its error sent to the client as the
        statement's (without a position, which would point into this text)."""
        await self._quiesce()
        sink: list[BackendMessage] = []
        data = (
            Parse(name=_CHECK_STMT, sql=sql).encode()
            + Bind(
                portal=_CHECK_STMT, statement=_CHECK_STMT, params=tuple(p.encode() for p in params)
            ).encode()
            + Execute(portal=_CHECK_STMT).encode()
            + Close(kind="P", name=_CHECK_STMT).encode()
            + Close(kind="S", name=_CHECK_STMT).encode()
        )
        self._forward(data, Kind.PARSE, forward=False, sink=sink)
        for kind in (Kind.BIND, Kind.EXECUTE, Kind.CLOSE, Kind.CLOSE):
            self._expect(Expect(kind, forward=False, sink=sink))
        if not extended:
            self._forward(Sync().encode(), Kind.SYNC, forward=False, sink=sink)
        await self._quiesce()
        row: tuple[bytes | None, ...] = ()
        for msg in sink:
            if isinstance(msg, ErrorResponse):
                self._send(ErrorResponse(fields=tuple(f for f in msg.fields if f[0] in "SVCMDH")))
                self._flush_client()
                return None
            if isinstance(msg, DataRow) and not row:
                row = msg.values
        return row

    # ---------------------------------------------------------------- cancel / shutdown

    def cancel(self) -> None:
        """A matching CancelRequest arrived (protocol-flow "Canceling Requests in Progress")."""
        if self._local_task is not None and not self._local_task.done():
            self._local_task.cancel()
            return
        if self.upstream is not None and self.pending:
            task = asyncio.create_task(self.upstream.cancel())
            self.server.keep(task)


_C, _E, _S, _Z = b"CESZ"
_B, _F, _P, _Q = b"BFPQ"
# Backend message types that need more than relaying: asynchronous ones, errors, the end
# of a request, COPY, authentication (the connection state watches Z, E, G, W and R).
_TRACKED = frozenset(b"NSAEZGWR")
_TRACKED_TAGS = _TRACKED | frozenset(b"C")  # and CommandComplete (LocalObjects.watching)
_SKIP_UNTIL_SYNC = ConnState.SKIP_UNTIL_SYNC  # read for every relayed message

# Reads remembered per session for Session._relay_known, and the largest one.
_MEMO_READS = 32
_MEMO_READ = 1024
#: A Query longer than this (characters) is handled by the session's task, not from the read
#: callback: it is checked against ``max_statement_size``, and its statements are routed one
#: at a time with the loop free for other sessions in between.
_ROUTE_IN_TASK = 64 * 1024

# Client bytes buffered beyond this while the task is busy pause reading from the client.
_READ_AHEAD = 1 << 20


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # no address (a Unix socket), or not an IP address
        return False


def _decode(frame: bytes) -> BackendMessage:
    return decode_backend(frame[:1], frame[5:])


def _result_format_error(portal: Portal) -> LaprasError | None:
    """PostgreSQL takes any result format code at Bind (Describe shows it as it is) and refuses
    one other than text or binary when the portal runs (printtup.c), before any row."""
    for f in portal.fields:
        if f.format != 0 and f.format != 1:
            return UnsupportedFormatCode(f"unsupported format code: {f.format}")
    return None


# The binary receive functions of fixed-size types read exactly their size with pq_getmsgint
# (boolrecv: pq_getmsgbyte), and exec_bind_message requires the value to be used up.
_BINARY_SIZE = {
    pgtypes.BOOL: 1,
    pgtypes.INT2: 2,
    pgtypes.INT4: 4,
    pgtypes.INT8: 8,
    pgtypes.OID: 4,
    pgtypes.FLOAT4: 4,
    pgtypes.FLOAT8: 8,
    pgtypes.DATE: 4,
    pgtypes.TIMESTAMP: 8,
    pgtypes.TIMESTAMPTZ: 8,
}


def _binary_length_error(oid: int, raw: bytes, i: int) -> LaprasError | None:
    """PostgreSQL's error for binary parameter ``i`` of a fixed-size type of the wrong size."""
    size = _BINARY_SIZE.get(oid)
    if size is None or len(raw) == size:
        return None
    if len(raw) < size:
        return ProtocolError(
            "no data left in message" if size == 1 else "insufficient data left in message"
        )
    return InvalidBinaryRepresentation(f"incorrect binary data format in bind parameter {i + 1}")


def _merged(declared: Sequence[int], known: Sequence[int]) -> tuple[int, ...]:
    """Parameter types: the declared ones, the known ones where a declared one is 0 or
    missing (PostgreSQL infers those)."""
    n = max(len(declared), len(known))
    out = []
    for i in range(n):
        d = declared[i] if i < len(declared) else 0
        out.append(d or (known[i] if i < len(known) else 0))
    return tuple(out)


def _cursor_fields(cursor: Cursor, fmt: int) -> tuple[FieldDescription, ...]:
    return tuple(field_from_column(c, fmt) for c in cursor.columns)


# Type names in PostgreSQL's "invalid input syntax for type ..." messages.
_TYPE_NAMES = {
    pgtypes.BOOL: "boolean",
    pgtypes.INT2: "smallint",
    pgtypes.INT4: "integer",
    pgtypes.INT8: "bigint",
    pgtypes.NUMERIC: "numeric",
    pgtypes.FLOAT4: "real",
    pgtypes.FLOAT8: "double precision",
    pgtypes.DATE: "date",
    pgtypes.TIMESTAMP: "timestamp without time zone",
    pgtypes.TIMESTAMPTZ: "timestamp with time zone",
    pgtypes.OID: "oid",
}


def _dup_statement(name: str) -> LaprasError:
    return DuplicatePreparedStatement(f'prepared statement "{name}" already exists')


def _bad_param(e: BaseException) -> LaprasError:
    return InvalidParameterValue(
        "invalid input value for a bind parameter", detail=type(e).__name__
    )
