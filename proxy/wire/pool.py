"""The pooler: backend connections shared by the sessions of one user (PgBouncer's pooler).

A session holds a backend connection only while it needs one. With ``pool_mode =
"transaction"`` (the default) it takes one when it has something to send and gives it back
when the backend has answered everything and reports no transaction open (ReadyForQuery
'I', no extended batch or COPY under way); with ``"session"`` it keeps one from login to
close. A session that runs a statement leaving state in the backend's session (``SET``
outside a transaction block, ``LISTEN``, ``PREPARE``, ``DECLARE ... WITH HOLD``, a temporary
table, a session-level advisory lock, ``set_config``) is *pinned*: it keeps its connection
until it closes, as if in session mode (:func:`pins_session`).

Safety between clients does not rest on that text check: a connection passes from one client
to another only through ``DISCARD ALL`` (PostgreSQL's own reset of every kind of session
state: settings, prepared statements, cursors, ``LISTEN``, advisory locks, temporary tables,
sequences, plans), followed by what the new client had that the reset took away -- the
reported parameters it was told (``application_name``, ``DateStyle``...: the ones it changed
are set again) and its tracked settings; its protocol-level prepared statements are parsed
again as it next uses each (:meth:`PoolClient._ensure_prepared`, PgBouncer 1.21's
``max_prepared_statements``). A connection given back to the client that last used it needs
none of this, so a client that finds its own connection idle takes it at once.

Pools are per *key*: the backend role (each analyst has their own, so pools are per user), the
database, and the start-up parameters the client sent -- every connection of a pool started
with the same ones, so ``DISCARD ALL`` brings any of them back to what the client was told at
login. Each pool opens at most ``pool_size`` connections; a session that needs one when all
are busy waits, first come first served, up to ``pool_timeout`` seconds, then ends with FATAL
53300 (its transaction cannot start). Connections idle longer than ``server_idle_timeout`` are
closed.

The pool owns its idle connections: it reads them (a notice, a parameter change or a
notification is dropped; anything else, or the connection closing, drops the connection).
:class:`ServerPool` is the server side; :class:`PoolClient` is the session's part (taking a
connection, the pipelined reset, giving it back, pinning).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from dp.errors import LaprasError
from proxy.errors import TooManyConnections, UpstreamUnavailable
from proxy.wire.messages import ParameterStatus, Parse, Query
from proxy.wire.protocol import ConnState, ServerConnection
from proxy.wire.relay import BackendRelay, Expect, Kind, SessionClosed
from proxy.wire.sqlsplit import TXN_CONTROL
from proxy.wire.upstream import UpstreamConfig, UpstreamConnection, UpstreamStartupError

log = logging.getLogger("lapras.proxy.pool")


class PoolMode(enum.Enum):
    TRANSACTION = "transaction"
    SESSION = "session"


#: Reported parameters (GUC_REPORT) a client may change and a reset sets back to its value.
TRACKED_PARAMETERS = (
    "application_name",
    "client_encoding",
    "DateStyle",
    "IntervalStyle",
    "TimeZone",
    "standard_conforming_strings",
    "search_path",
    "default_transaction_read_only",
)

# Statements that leave state in the backend's session beyond their transaction: the first
# word (after comments), or a function anywhere in the text. SET and RESET are read apart
# (_SETTING); SET LOCAL, SET TRANSACTION, SET CONSTRAINTS and the transaction-level advisory
# locks leave nothing.
_LEAD = r"^(?:\s|--[^\n]*\n?|/\*.*?\*/)*"
_PINNING_HEAD = re.compile(
    _LEAD
    + r"""(?:LISTEN\b|PREPARE(?!\s+TRANSACTION)\b|LOAD\b
      |DECLARE\b[^;]*\bWITH\s+HOLD\b
      |CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?(?:TEMP|TEMPORARY)\b
      |(?:CREATE\s+)?(?:UNLOGGED\s+)?TABLE\b[^;]*\b(?:TEMP|TEMPORARY)\b)""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)
_PINNING_CALL = re.compile(
    r"\b(?:set_config|pg_(?:try_)?advisory_lock(?:_shared)?|dblink_connect(?:_u)?|setseed)\s*\(",
    re.IGNORECASE,
)
_SELECT_INTO_TEMP = re.compile(r"\bINTO\s+(?:TEMP|TEMPORARY)\b", re.IGNORECASE)
_NAME = r'(?:"(?:[^"]|"")+"|[a-z_][\w$]*)(?:\.(?:"(?:[^"]|"")+"|[a-z_][\w$]*))?'
_SETTING = re.compile(
    _LEAD
    + r"(?P<verb>SET|RESET)\s+(?:(?P<session>SESSION)\s+)?"
    + r"(?P<name>TIME\s+ZONE\b|"
    + _NAME
    + r")(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_DISCARD_ALL_SQL = re.compile(_LEAD + r"DISCARD\s+ALL\s*;?\s*$", re.IGNORECASE | re.DOTALL)
# SET forms without a session setting's value: transaction-scoped ones, and identity
_TRANSACTION_SCOPED = frozenset({"local", "transaction", "constraints"})
_IDENTITY = frozenset({"role", "authorization", "session"})


@dataclass(frozen=True, slots=True)
class SessionEffect:
    """What a statement leaves in the backend's session (:func:`session_effect`): a setting
    (``set``: replayed on the next connection after a hand-off), a setting reset (``reset``;
    ``name`` None: RESET ALL), or state that keeps the connection (``pin``)."""

    kind: Literal["set", "reset", "pin"]
    name: str | None = None


def session_effect(sql: str) -> SessionEffect | None:
    """What ``sql`` leaves in the backend's session; None: nothing beyond its transaction.

    >>> [session_effect(s) for s in ("SET search_path = x", "SET LOCAL work_mem = '1MB'")]
    [SessionEffect(kind='set', name='search_path'), None]
    >>> [session_effect(s) for s in ("select set_config('a.b', '1', false)", "SELECT 1")]
    [SessionEffect(kind='pin', name=None), None]
    """
    m = _SETTING.match(sql)
    if m is not None:
        raw = " ".join(m["name"].split())
        name = raw if '"' in raw else raw.lower()  # (the key of what is replayed)
        name = "timezone" if name == "time zone" else name
        rest = m["rest"].lstrip()
        if m["verb"].upper() == "RESET":
            if m["session"] or rest.rstrip(";").strip():
                return SessionEffect("pin")  # RESET SESSION AUTHORIZATION, or unknown
            return SessionEffect("reset", None if name == "all" else name)
        if name in _TRANSACTION_SCOPED and not m["session"]:
            return None
        if name in _IDENTITY or not (
            name == "timezone" or rest[:1] == "=" or rest[:2].upper() == "TO"
        ):
            return SessionEffect("pin")  # SET ROLE, SET SESSION AUTHORIZATION, other forms
        if _PINNING_CALL.search(rest):
            return SessionEffect("pin")
        return SessionEffect("set", name)
    if _DISCARD_ALL_SQL.match(sql):
        return SessionEffect("reset", None)  # every setting back to its default
    if _PINNING_HEAD.match(sql) or _PINNING_CALL.search(sql) or _SELECT_INTO_TEMP.search(sql):
        return SessionEffect("pin")
    return None


_T = TypeVar("_T")


class LoginDoors(Protocol):
    """What opens a backend role's login for the proxy's own (:class:`proxy.doors.Doors`)."""

    async def enter(self, role: str, login: Callable[[], Awaitable[_T]]) -> _T:
        """``login()``, run while ``role`` may log in."""
        ...


@dataclass(frozen=True, slots=True)
class PoolKey:
    """What connections of one pool share: who logs in, where, with which start-up
    parameters (in the client's order)."""

    user: str  # the proxy user
    upstream: UpstreamConfig
    database: str | None
    params: tuple[tuple[str, str], ...]


@dataclass(eq=False, slots=True)
class Pooled:
    """One backend connection of a pool, and what the pool knows of it."""

    up: UpstreamConnection
    welcome: tuple[ParameterStatus, ...]  # what it reported at login
    owner: object | None  # the client whose session state it holds (None: no one's)
    clean: bool = True  # as it logged in: used by no client yet
    idle_since: float = 0.0
    # the tracked parameters' values at login, which DISCARD ALL comes back to
    started: tuple[tuple[str, str | None], ...] = ()
    # the welcome as a read-only map, which the sessions logging in on it share
    reported: Mapping[str, str] = field(init=False)

    def __post_init__(self) -> None:
        at_login = {w.name: w.value for w in self.welcome}
        self.started = tuple((n, at_login.get(n)) for n in TRACKED_PARAMETERS)
        self.reported = MappingProxyType(at_login)


class PoolTimeout(TooManyConnections):
    """53300: no connection of the pool became free within ``pool_timeout``."""


@dataclass(frozen=True, slots=True)
class PoolStats:
    """One row of ``SHOW LAPRAS POOLS``."""

    user: str
    database: str
    backend_role: str
    mode: str
    active: int
    idle: int
    waiting: int
    max_wait: float  # seconds the longest-waiting client has waited
    pool_size: int


@dataclass(eq=False, slots=True)
class _Waiter:
    """A session waiting for a connection of a full pool."""

    client: object
    grant: Callable[[Pooled], None]
    fail: Callable[[BaseException], None]
    since: float
    timer: asyncio.TimerHandle | None = None


class ServerPool:
    """The connections of one key (module doc). Everything runs on the event loop: a
    connection given back goes, in the same callback, to the session waiting longest."""

    def __init__(
        self,
        key: PoolKey,
        *,
        mode: PoolMode,
        size: int,
        timeout: float,
        idle_timeout: float,
        doors: LoginDoors | None = None,
    ) -> None:
        self.key = key
        self.doors = doors
        self.mode = mode
        self.size = size
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self._idle: list[Pooled] = []  # most recently given back last
        self._active: set[Pooled] = set()
        self._opening = 0
        self._waiters: deque[_Waiter] = deque()

    # ------------------------------------------------------------------ taking and giving

    def take(self, client: object, *, own_only: bool = False) -> Pooled | None:
        """An idle connection at once, when no session is waiting: the one ``client`` used
        last (it holds ``client``'s state), else (unless ``own_only``) the one given back
        last, which the caller resets (:func:`reset_requests`); None when there is none."""
        if self._waiters or not self._idle:
            return None
        i = next(
            (i for i in range(len(self._idle) - 1, -1, -1) if self._idle[i].owner is client), -1
        )
        if i < 0 and own_only:
            return None
        p = self._idle.pop(i)
        self._active.add(p)
        return p

    def wait(
        self,
        client: object,
        grant: Callable[[Pooled], None],
        fail: Callable[[BaseException], None],
    ) -> None:
        """Call ``grant`` with the next connection free or opened for ``client``, first come
        first served, from the event loop; or ``fail`` with PoolTimeout after pool_timeout,
        or with the error of opening a connection for it."""
        w = _Waiter(client, grant, fail, time.monotonic())
        w.timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, w)
        self._waiters.append(w)
        self._open_for_waiters()

    def stop_waiting(self, client: object) -> None:
        for w in [w for w in self._waiters if w.client is client]:
            self._waiters.remove(w)
            if w.timer is not None:
                w.timer.cancel()

    async def acquire(self, client: object) -> Pooled:
        """A connection for ``client``'s login, with no other client's session state: an idle
        one reset with ``DISCARD ALL``, a new one, or one given back (waiting as
        :meth:`wait`)."""
        p = self.take(client)
        if p is None:
            fut: asyncio.Future[Pooled] = asyncio.get_running_loop().create_future()

            def grant(got: Pooled) -> None:
                if fut.done():  # the login has gone meanwhile
                    self.release(got, None)
                else:
                    fut.set_result(got)

            def fail(e: BaseException) -> None:
                if not fut.done():
                    fut.set_exception(e)

            self.wait(client, grant, fail)
            try:
                p = await fut
            finally:
                self.stop_waiting(client)
        if p.owner is not client and not p.clean:
            try:
                await _exchange(p, _DISCARD_ALL)
            except BaseException:
                self.discard(p)
                raise
        p.owner, p.clean = client, False
        return p

    def release(self, p: Pooled, owner: object | None) -> None:
        """``p`` is idle again (the backend owes nothing, no transaction is open) with the
        session state of ``owner`` (None: of no session still open)."""
        self._active.discard(p)
        p.owner = owner
        if p.up.closed:
            self._open_for_waiters()
            return
        p.up.resume_reading()
        self._hand_over(p)

    def discard(self, p: Pooled) -> None:
        """``p`` cannot be used again (lost, or left in an unknown state): closed."""
        self._active.discard(p)
        if p in self._idle:
            self._idle.remove(p)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(p.up.close())
        self._open_for_waiters()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for p in idle:
            await p.up.close()

    def close_expired(self) -> None:
        if not self.idle_timeout:
            return
        limit = time.monotonic() - self.idle_timeout
        for p in [p for p in self._idle if p.idle_since < limit]:
            self.discard(p)

    def stats(self) -> PoolStats:
        now = time.monotonic()
        k = self.key
        return PoolStats(
            user=k.user,
            database=k.database or k.upstream.database,
            backend_role=k.upstream.user,
            mode=self.mode.value,
            active=len(self._active),
            idle=len(self._idle),
            waiting=len(self._waiters),
            max_wait=round(max((now - w.since for w in self._waiters), default=0.0), 3),
            pool_size=self.size,
        )

    # ------------------------------------------------------------------ inside

    def _hand_over(self, p: Pooled) -> None:
        """``p`` (free) goes to the session waiting longest, or waits idle in the pool."""
        if self._waiters:
            self._grant(self._next_waiter(), p)
            return
        p.idle_since = time.monotonic()
        p.up.bind(*self._idle_callbacks(p))
        self._idle.append(p)

    def _next_waiter(self) -> _Waiter:
        w = self._waiters.popleft()
        if w.timer is not None:
            w.timer.cancel()
        return w

    def _grant(self, w: _Waiter, p: Pooled) -> None:
        self._active.add(p)
        try:
            w.grant(p)
        except Exception as e:  # a bug in the session: the connection's state is unknown
            log.error("pool: handing a connection over failed", exc_info=e)
            self.discard(p)

    def _expire(self, w: _Waiter) -> None:
        if w in self._waiters:
            self._waiters.remove(w)
            w.fail(
                PoolTimeout(
                    f"no backend connection became free within {self.timeout:g} s",
                    detail=(
                        f"All {self.size} connections of the pool of user "
                        f'"{self.key.user}" were in use.'
                    ),
                    hint="raise [server] pool_size or pool_timeout, or keep transactions short",
                )
            )

    def _open_for_waiters(self) -> None:
        """Open connections for the waiting sessions, as far as pool_size allows."""
        room = self.size - len(self._active) - len(self._idle) - self._opening
        for _ in range(min(room, len(self._waiters) - self._opening)):
            self._opening += 1
            asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        k = self.key

        def login() -> Awaitable[UpstreamConnection]:
            return UpstreamConnection.connect(k.upstream, k.params, database=k.database)

        try:
            doors = self.doors
            up = await (doors.enter(k.upstream.user, login) if doors is not None else login())
        except Exception as e:
            self._opening -= 1
            if self._waiters:  # the error is the first waiting session's
                self._next_waiter().fail(e)
            return
        self._opening -= 1
        p = Pooled(up, tuple(up.parameters), owner=None)
        up.start_relay(*self._idle_callbacks(p))
        self._hand_over(p)

    def _idle_callbacks(
        self, p: Pooled
    ) -> tuple[Callable[[list[bytes]], None], Callable[[BaseException], None]]:
        def on_frames(frames: list[bytes]) -> None:
            # a notice, a parameter change or a notification is dropped; anything else is a
            # FATAL (the backend was terminated) or out of step
            if any(f[:1] not in b"NSA" for f in frames):
                self.discard(p)

        def on_lost(e: BaseException) -> None:
            self.discard(p)

        return on_frames, on_lost


def reset_requests(
    p: Pooled, params: Mapping[str, str], settings: Sequence[str] = ()
) -> list[bytes]:
    """What makes ``p`` hold the settings of a client it was not last used by, as simple
    Queries: ``DISCARD ALL`` unless no client used it yet (alone: it refuses to run in the
    implicit transaction of several statements), then ``SET`` for each reported parameter
    in ``params``, what the client was told, that differs from what ``p`` started with, and
    the client's own ``settings`` statements again."""
    sets = [
        f"SET {_ident(name)} TO {_literal(want)}"
        for name, at_login in p.started
        if (want := params.get(name)) is not None and want != at_login
    ]
    sets += [s.rstrip().rstrip(";") for s in settings]
    queries = [] if p.clean else [_DISCARD_ALL]  # back to the start-up's values
    if sets:
        queries.append(Query(sql="; ".join(sets)).encode())
    return queries


_DISCARD_ALL = Query(sql="DISCARD ALL").encode()


async def _exchange(p: Pooled, data: bytes) -> None:
    """Send one simple Query on an idle connection and wait for its ReadyForQuery; an error
    loses the connection (ConnectionResetError)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    failed = False

    def on_frames(frames: list[bytes]) -> None:
        nonlocal failed
        for f in frames:
            if f[:1] == b"E":
                failed = True
            elif f[:1] == b"Z" and not done.done():
                done.set_result(None)

    def on_lost(e: BaseException) -> None:
        if not done.done():
            done.set_exception(ConnectionResetError("upstream closed the connection"))

    p.up.bind(on_frames, on_lost)
    p.up.write(data)
    await asyncio.wait_for(done, p.up.config.connect_timeout)
    if failed:
        raise ConnectionResetError("the reset of a pooled connection failed")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class PoolSide(Protocol):
    """What the pooler's part of a session uses of the rest of it."""

    conn: ServerConnection
    relay: BackendRelay

    pid: int
    pool: ServerPool | None

    def _on_frames(self, frames: list[bytes]) -> None: ...

    def _on_upstream_lost(self, e: BaseException) -> None: ...

    def _on_backend_read(self, data: bytes) -> bool: ...

    def _end(self, err: LaprasError) -> None: ...

    def _relayed_statement(self, name: str) -> Parse | None:
        """The Parse of the protocol-level statement ``name`` the session relayed, if it
        holds one by that name."""


class PoolClient(PoolSide):
    """The session's hold on a backend connection (the pooler's client side): taken when
    something is to be sent, given back when the backend owes nothing and has no
    transaction open (transaction pooling), kept by a pinned session; the session's
    settings and prepared statements follow it from connection to connection."""

    if not TYPE_CHECKING:  # the session's slots hold its attributes
        __slots__ = ()

    upstream: UpstreamConnection | None  # the backend connection held now
    _pooled: Pooled | None  # ... and where it goes back
    _pinned: bool  # keeps its connection: a statement left session state in the backend
    _cancelling: int  # cancel requests under way: the connection is kept
    _granted: asyncio.Future[None] | None  # set while waiting for a connection
    _settings: dict[str, str]  # the client's own SET statements, by setting: replayed
    _tentative: list[tuple[SessionEffect, str]]  # ... made in the open transaction block
    _implicit: tuple[SessionEffect, str] | None  # ... by an extended-protocol Execute
    # its protocol-level statements the backend it holds has (a dict as a set: 64 bytes empty)
    _on_backend: dict[str, None]

    def _backend_needed(self) -> None:
        """The backend comes to owe something: the first message forwarded since the
        session gave its connection back takes one (or waits for one) before anything of
        it is decided against the backend's state (which statements it holds)."""
        if self.upstream is None and self._granted is None and self.pool is not None:
            self._need_backend()

    def _ensure_prepared(self, name: str) -> None:
        """A Bind or Describe of statement ``name`` is about to be forwarded: when the
        backend does not hold it (another client used the connection since the session
        parsed it), it is parsed again first, under its own name, as PgBouncer 1.21 does; its
        error, if it no longer parses, is the client's."""
        if self.conn.state is ConnState.SKIP_UNTIL_SYNC:
            return  # (the backend skips it: the client's Sync comes first)
        self._backend_needed()  # which backend it goes to decides
        if name in self._on_backend:
            return
        parse = self._relayed_statement(name)
        if parse is None:
            return  # not one of the session's: the backend answers for it

        def failed() -> None:
            self._on_backend.pop(name, None)

        self.relay.forward(
            parse.encode(), Kind.PARSE, forward=False, on_error=failed, show_error=True
        )
        self._on_backend[name] = None

    def _need_backend(self) -> bool:
        """Something is to be sent: take an idle connection (True), or wait for one (False:
        what is to be sent stays in ``relay.outgoing``, and goes when it comes)."""
        assert self.pool is not None
        if self._granted is not None:
            return False
        p = self.pool.take(self)
        if p is not None:
            self._take(p)
            return True
        self._granted = asyncio.get_running_loop().create_future()
        self._on_backend = {}  # (a connection handed over is another client's, reset)
        self.pool.wait(self, self._on_granted, self._on_pool_failed)
        return False

    def _on_granted(self, p: Pooled) -> None:
        """The pool hands over a connection (from the event loop): what waited goes now."""
        granted, self._granted = self._granted, None
        self._take(p, waited=True)
        outgoing = self.relay.outgoing
        if outgoing and not self.relay.closed:
            p.up.write(bytes(outgoing))
            outgoing.clear()
        if granted is not None and not granted.done():
            granted.set_result(None)

    def _on_pool_failed(self, e: BaseException) -> None:
        """No connection within pool_timeout (53300), or none could be opened (08006): the
        session ends, as PgBouncer's query_wait_timeout ends a client."""
        granted, self._granted = self._granted, None
        if not isinstance(e, LaprasError):
            detail = e.error.field("M") if isinstance(e, UpstreamStartupError) else None
            e = UpstreamUnavailable(
                "could not open a backend connection", detail=detail or type(e).__name__
            )
        self._end(e)
        if granted is not None and not granted.done():
            granted.set_exception(SessionClosed())

    def _take(self, p: Pooled, *, waited: bool = False) -> None:
        """Hold ``p``: when another client used it last, its reset goes first (pipelined
        with what this session sends: no round trip of its own), and the backend holds none
        of the session's prepared statements (parsed again as they are used; ``waited``:
        those the session sent while it waited for ``p`` are on their way)."""
        own = p.owner is self
        self._pooled, self.upstream = p, p.up
        p.up.bind(self._on_frames, self._on_upstream_lost, self._on_backend_read)
        if not own:
            if not waited:
                self._on_backend = {}
            queries = reset_requests(p, self.relay.params, tuple(self._settings.values()))
            expects = [
                Expect(Kind.QUERY, forward=False, pool=True, on_error=self._reset_failed)
                for _ in queries
            ]
            self.relay.prepend(b"".join(queries), expects)
            p.owner, p.clean = self, False

    def _reset_failed(self) -> None:
        log.warning("session %d: the reset of a pooled backend connection failed", self.pid)
        self._end(UpstreamUnavailable("could not reset a pooled backend connection"))

    def _backend_idle(self) -> bool:
        """The backend owes nothing, has no transaction, batch or COPY open."""
        relay = self.relay
        return (
            self._pooled is not None
            and not relay.pending
            and not relay.outgoing
            and not relay.upstream_open
            and not relay.copy_in
            and not relay.closed
            and self.conn.txn_status == "I"
            and not self._cancelling
        )

    def _release_if_idle(self) -> None:
        """Transaction pooling: give the connection back between transactions."""
        pool = self.pool
        if (
            pool is not None
            and pool.mode is PoolMode.TRANSACTION
            and not self._pinned
            and self._backend_idle()
        ):
            self._give_back(True, owner=self)

    def _give_back(self, reusable: bool, owner: object | None = None) -> None:
        p, self._pooled, self.upstream = self._pooled, None, None
        if p is None or self.pool is None:
            return
        if reusable and not p.up.closed:
            self.pool.release(p, owner)
        else:
            self.pool.discard(p)

    def _session_state(self, statements: Sequence[str]) -> Callable[[], None] | None:
        """What relayed ``statements`` (one message) leave in the backend's session. A SET or
        RESET (or several in one message) is tracked: at once outside a transaction block, and
        in one when the block commits (:meth:`_transaction_ended`); the callback returned undoes
        that when the backend refuses it. Anything else that leaves state pins the session,
        and so does a savepoint in a block with a SET in it (a partial rollback)."""
        if self._pinned:
            return None
        if self._tentative and any(_SAVEPOINT.match(s) for s in statements):
            self._pin()
            return None
        changes = [(e, s) for s in statements if (e := session_effect(s)) is not None]
        if not changes:
            return None
        if (
            any(e.kind == "pin" for e, _ in changes)
            # (with replies still owed, the transaction status it will run in is not known)
            or self.relay.pending
            or (len(statements) > 1 and any(TXN_CONTROL.match(s) for s in statements))
        ):
            self._pin()
            return None
        # One message runs as one transaction (implicit, or part of the open block): its
        # settings count or fail together.
        if self.conn.txn_status != "I":
            self._tentative += changes
            if self.relay.tags is None:
                self.relay.tags = []

            def drop() -> None:
                self._tentative = [c for c in self._tentative if c not in changes]

            return drop
        before = dict(self._settings)
        for effect, sql in changes:
            _apply(self._settings, effect, sql)

        def undo() -> None:
            self._settings = before

        return undo

    def _transaction_ended(self) -> None:
        """The block with tracked SETs in it has ended: they count if it committed, are gone
        if it rolled back; pinned when the tags do not say which."""
        tags, self.relay.tags = self.relay.tags or [], None
        ends = [t for t in tags if t in _TRANSACTION_ENDS]
        tentative, self._tentative = self._tentative, []
        if ends == [b"COMMIT"]:
            for effect, sql in tentative:
                _apply(self._settings, effect, sql)
        elif ends != [b"ROLLBACK"]:
            self._pin()

    def _executed_setting(self, effect: SessionEffect, sql: str) -> None:
        """An Execute of a SET or RESET statement (the extended protocol: pgjdbc, Npgsql,
        asyncpg's ``fetch``) is relayed. It is tracked where its outcome is plain: outside a
        transaction block, nothing else tracked meanwhile; it counts if, once the backend has
        answered everything, the batch did nothing else and had no error
        (:meth:`_batch_ended`). Anything else pins the session."""
        if self._pinned:
            return
        # (tags are kept while a SET is tracked already: in the open block, or like this one)
        if self.conn.txn_status != "I" or self.relay.tags is not None:
            self._pin()
            return
        self._implicit = (effect, sql)
        self.relay.tags = []

    def _batch_ended(self) -> None:
        """The backend answered everything since an extended SET or RESET was executed: it
        counts when its completion is the only tag seen (no other statement, no error:
        :attr:`BackendRelay.tags`) and no transaction block is open; else pinned."""
        assert self._implicit is not None
        (effect, sql), self._implicit = self._implicit, None
        tags, self.relay.tags = self.relay.tags or [], None
        if self.conn.txn_status == "I" and len(tags) == 1 and tags[0] in _SETTING_TAGS:
            _apply(self._settings, effect, sql)
        else:
            self._pin()

    def _pin(self) -> None:
        self._pinned = True
        self._tentative.clear()
        self._implicit = None
        self.relay.tags = None


def _apply(settings: dict[str, str], effect: SessionEffect, sql: str) -> None:
    if effect.kind == "set":
        assert effect.name is not None
        settings.pop(effect.name, None)  # (the latest last)
        settings[effect.name] = sql
    elif effect.name is None:
        settings.clear()  # RESET ALL, DISCARD ALL
    else:
        settings.pop(effect.name, None)


_SAVEPOINT = re.compile(
    _LEAD + r"(?:SAVEPOINT|RELEASE|ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO)\b",
    re.IGNORECASE | re.DOTALL,
)
#: The tags of a completed SET, RESET (ALL) and DISCARD ALL.
_SETTING_TAGS = frozenset({b"SET", b"RESET", b"DISCARD ALL"})
#: The tags of the statements that end a transaction block (PREPARE TRANSACTION: pinned).
_TRANSACTION_ENDS = frozenset({b"COMMIT", b"ROLLBACK", b"PREPARE TRANSACTION"})


class Pooler:
    """The pools of one proxy process, by key."""

    def __init__(
        self,
        *,
        mode: PoolMode,
        size: int,
        timeout: float,
        idle_timeout: float,
        doors: LoginDoors | None = None,
    ) -> None:
        self.mode = mode
        self._size, self._timeout, self._idle_timeout = size, timeout, idle_timeout
        self._doors = doors  # analysts' roles log in through them (proxy.doors)
        self._pools: dict[PoolKey, ServerPool] = {}

    def pool(self, key: PoolKey) -> ServerPool:
        p = self._pools.get(key)
        if p is None:
            p = self._pools[key] = ServerPool(
                key,
                mode=self.mode,
                size=self._size,
                timeout=self._timeout,
                idle_timeout=self._idle_timeout,
                doors=self._doors,
            )
        return p

    def stats(self) -> list[PoolStats]:
        return [p.stats() for p in self._pools.values()]

    async def sweep(self) -> None:
        """Close connections idle past ``server_idle_timeout``, checking every tenth of it
        (at least every 5 s, at most every 60 s)."""
        if not self._idle_timeout:
            return
        every = min(60.0, max(5.0, self._idle_timeout / 10))
        while True:
            await asyncio.sleep(every)
            for p in self._pools.values():
                p.close_expired()

    async def close(self) -> None:
        for p in list(self._pools.values()):
            await p.close()
