"""The epoch watch: a closed epoch stops being answered in every proxy process, repeats included.

A proxy process keeps the folded state of an active epoch in memory and answers exact repeats
from it without touching the ledger (:mod:`proxy.epochs`). Charges never needed this module
(:meth:`proxy.ledger.PgLedger.exclusive` reads the epoch's row before every charge), but
without it a process kept serving stored answers of a closed epoch until a charge made it
reload. The watch closes that gap. It only ever stops answers; it never admits one, so it
cannot weaken the privacy guarantee: it makes ``lapras epoch close`` take effect at once.

The protocol, between every proxy process and the closer (``lapras epoch close``):

1. Each proxy process keeps one *watch session* on the state database. From the moment the
   process starts, before it loads any epoch, the session listens on :data:`CHANNEL`.
2. Before the process loads an epoch into memory, the session takes the *shared* session-level
   advisory lock ``(WATCH_SPACE, epoch id)`` with a try-lock; the process then re-reads, in a
   later statement (so in a later snapshot), that the epoch is still active. A failed try-lock
   means a closer is waiting for the lock: the epoch is treated as closed.
3. The closer sets the epoch's status to closed and notifies its id on :data:`CHANNEL` in one
   transaction, and notes the sessions holding the shared lock (the processes serving the
   epoch) just before the commit. After the commit it takes the lock *exclusively*, waiting at
   most a bounded time (:func:`confirm_close`), and releases it at once.
4. On the notification a process drops the epoch from memory, and only then releases its
   shared lock. The closer's exclusive lock is granted when every process serving the epoch has
   dropped it: each such process has *confirmed* the close.

Why a confirmed process answers nothing more from the epoch: a process answers from an epoch's
memory only while its session holds the epoch's shared lock (taken before the memory exists,
released after it is gone). A lock granted after the closer's exclusive lock is followed by a
re-read that sees the committed close (step 2): the epoch is never loaded. A lock granted before
makes the closer wait, and the process, listening since before the commit, receives the
notification and drops the epoch before it releases the lock. A load that was in progress when
the notification arrived is discarded when it finishes (the process remembers closed ids).

One session holds both the ``LISTEN`` and the locks, so that they share their fate: when the
session ends (its backend terminated, the server restarted, the connection cut), PostgreSQL
releases the locks, and the watch task, which waits on that very socket, sees the end at once:
the process drops every epoch from memory (they reload from the ledger at the next statement,
under a new session) and reconnects. A process that dies releases its locks with its session.
A session whose end is not seen (a silent network cut) is found dead by TCP keepalives (about
11 s here); a close meanwhile waits for it and reports it as not confirmed.

psycopg's ``notifies()`` holds the connection while it waits, so one task owns the session: it
waits for a notification or for a request (take or release a lock), whichever comes first, and
interrupts the wait to run a request. Notifications that arrive meanwhile are kept by psycopg
and read at the next wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from dp.errors import LaprasError

log = logging.getLogger("lapras.watch")

#: The notification channel of closes; the payload is the closed epoch's id.
CHANNEL = "lapras_epochs"
#: First key of the two-key advisory locks of the watch ("LAPW"), distinct from the ledger's
#: ``_LOCK_SPACE`` ("LAPR"), which serialises charges.
WATCH_SPACE = 0x4C415057
#: How long ``lapras epoch close`` waits, by default, for the processes serving the epoch.
CLOSE_WAIT = 10.0
#: The watch session's ``application_name`` (seen in ``pg_stat_activity``).
APPLICATION_NAME = "lapras epoch watch"
#: TCP keepalives of the watch session: a silently cut connection is found dead in ~11 s.
_KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}

_HOLDERS = (
    "SELECT DISTINCT pid FROM pg_catalog.pg_locks"
    " WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())"
    " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 2"
    " AND mode = 'ShareLock' AND granted"
)


class WatchUnavailableError(LaprasError):
    """08006 connection_failure: the process cannot keep its watch session on the state
    database, so it cannot load an epoch (it could not learn of the epoch's close)."""

    sqlstate = "08006"


class Watch(Protocol):
    """What the epoch service needs from a watch (PostgreSQL, or in memory for tests)."""

    def subscribe(self, on_closed: Callable[[int], None], on_lost: Callable[[], None]) -> None:
        """``on_closed(epoch_id)`` when an epoch was closed, ``on_lost()`` when the locks were
        lost; both are called synchronously, before the watch releases anything."""
        ...

    async def hold(self, epoch_id: int) -> bool:
        """Take the epoch's shared lock; False when a close is under way."""
        ...

    async def release(self, epoch_id: int) -> None: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


async def holders(conn: psycopg.AsyncConnection[Any], epoch_id: int) -> set[int]:
    """The backend pids of the sessions (one per proxy process) holding the epoch's shared
    watch lock."""
    cur = await conn.execute(_HOLDERS, (WATCH_SPACE, epoch_id))
    return {int(pid) for (pid,) in await cur.fetchall()}


async def confirm_close(
    conn: psycopg.AsyncConnection[Any], epoch_id: int, wait: float, serving: set[int]
) -> tuple[int, int]:
    """After the close of ``epoch_id`` committed: wait until every proxy process serving it has
    dropped it (step 3 of the module doc), at most ``wait`` seconds.

    ``serving``: the holders seen in the closing transaction, just before its commit (a fast
    process confirms as soon as the commit notifies it, before a count after the commit).
    Returns ``(serving, unconfirmed)``: how many processes held the epoch at the commit (those
    seen before it, and after it), and how many still held it when the wait ended (0 when
    every one confirmed). ``conn`` must be in autocommit mode, outside a transaction.
    """
    serving = serving | await holders(conn, epoch_id)
    millis = max(1, round(wait * 1000))  # lock_timeout = 0 would mean "wait forever"
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{millis}ms",))
            await conn.execute(
                "SELECT set_config('statement_timeout', %s, true)", (f"{2 * millis + 1000}ms",)
            )
            # Exclusive, transaction-scoped: granted once every shared holder released it, and
            # released again at the commit just after.
            await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (WATCH_SPACE, epoch_id))
    except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled):
        left = await holders(conn, epoch_id)
        return len(serving | left), len(left)
    return len(serving), 0


@dataclass(slots=True)
class _Request:
    hold: bool
    epoch_id: int
    done: asyncio.Future[bool]


async def _receive(conn: psycopg.AsyncConnection[Any]) -> list[psycopg.Notify]:
    """The next batch of notifications (cancellable while it waits: nothing is consumed)."""
    return [n async for n in conn.notifies(stop_after=1)]


class EpochWatch:
    """The watch session of one proxy process (see the module doc).

    :meth:`start` opens the session (and fails if the state database cannot be reached); a
    task then owns it until :meth:`close`. :meth:`hold` and :meth:`release` are requests to
    that task. A lost session is reported to the subscribers (``on_lost``) and reopened.
    """

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._held: set[int] = set()
        self._requests: deque[_Request] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._on_closed: list[Callable[[int], None]] = []
        self._on_lost: list[Callable[[], None]] = []
        #: The backend pid of the current session (None while there is none).
        self.backend_pid: int | None = None
        #: Sessions opened so far (1 after start; one more per reconnection).
        self.sessions = 0

    def subscribe(self, on_closed: Callable[[int], None], on_lost: Callable[[], None]) -> None:
        self._on_closed.append(on_closed)
        self._on_lost.append(on_lost)

    async def start(self) -> None:
        """Open the session and ``LISTEN``, then hand it to the watch task."""
        self._conn = await self._connect()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=APPLICATION_NAME)

    async def close(self) -> None:
        """Stop the task and end the session (PostgreSQL releases every lock with it)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._fail_requests()
        self._held.clear()
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        self.backend_pid = None

    async def hold(self, epoch_id: int) -> bool:
        """Take the epoch's shared lock (try-lock); False when a close waits for it."""
        return await self._request(True, epoch_id)

    async def release(self, epoch_id: int) -> None:
        """Release the epoch's shared lock, if this session holds it (never fails: a lock of a
        session that is gone is released already)."""
        await self._request(False, epoch_id)

    async def _request(self, hold: bool, epoch_id: int) -> bool:
        if self._task is None or self._task.done():
            if not hold:
                return True
            raise WatchUnavailableError("the proxy's epoch watch is not running")
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._requests.append(_Request(hold, epoch_id, done))
        self._wake.set()
        return await done

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(
            self._dsn,
            autocommit=True,
            application_name=APPLICATION_NAME,
            connect_timeout=10,
            **_KEEPALIVES,
        )
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            await conn.close()
            raise
        self.sessions += 1
        self.backend_pid = conn.info.backend_pid
        return conn

    async def _run(self) -> None:
        delay = 0.0  # before reconnecting: grows while sessions fail at once, else 0
        while True:
            conn = self._conn
            if conn is None:
                try:
                    conn = self._conn = await self._connect()
                except Exception as exc:
                    log.warning("cannot reopen the epoch watch session: %s", exc)
                    self._fail_requests()
                    delay = min(max(2 * delay, 0.25), 5.0)
                    await self._pause(delay)
                    continue
                log.info("epoch watch session reopened")
            opened = time.monotonic()
            try:
                await self._serve(conn)
            except Exception as exc:  # the session is gone (or a bug): drop everything, reopen
                log.warning(
                    "the epoch watch session was lost (%s): every epoch is dropped from memory",
                    exc,
                )
                await self._lost(conn)
            delay = min(max(2 * delay, 0.25), 5.0) if time.monotonic() - opened < 1 else 0.0
            await self._pause(delay)

    async def _serve(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Run requests and handle notifications on ``conn`` until it fails."""
        while True:
            while self._requests:
                request = self._requests[0]
                if not request.done.done():  # a cancelled caller takes no lock
                    ok = await self._lock(conn, request.hold, request.epoch_id)
                    if not request.done.done():
                        request.done.set_result(ok)
                self._requests.popleft()
            for note in await self._wait(conn):
                await self._closed(conn, note.payload)

    async def _lock(self, conn: psycopg.AsyncConnection[Any], hold: bool, epoch_id: int) -> bool:
        key = (WATCH_SPACE, epoch_id)
        if hold:
            if epoch_id not in self._held:
                cur = await conn.execute("SELECT pg_try_advisory_lock_shared(%s, %s)", key)
                row = await cur.fetchone()
                if not (row and row[0]):
                    return False
                self._held.add(epoch_id)
            return True
        if epoch_id in self._held:
            await conn.execute("SELECT pg_advisory_unlock_shared(%s, %s)", key)
            self._held.discard(epoch_id)
        return True

    async def _closed(self, conn: psycopg.AsyncConnection[Any], payload: str) -> None:
        """A close was notified: the subscribers drop the epoch, then its lock is released."""
        try:
            epoch_id = int(payload)
        except ValueError:
            return
        try:
            for on_closed in self._on_closed:
                on_closed(epoch_id)
        except Exception:  # not dropped: keep the lock, the closer reports us unconfirmed
            log.exception("could not drop closed epoch %d from memory", epoch_id)
            return
        await self._lock(conn, False, epoch_id)

    async def _wait(self, conn: psycopg.AsyncConnection[Any]) -> list[psycopg.Notify]:
        """The next notifications, or none as soon as a request is queued."""
        if self._requests:
            return []
        self._wake.clear()
        receive = asyncio.ensure_future(_receive(conn))
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((receive, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            receive.cancel()  # no-op when it is done
            await asyncio.wait((receive,))
        if receive.cancelled():
            return []
        return receive.result()  # raises when the session failed

    async def _pause(self, seconds: float) -> None:
        """Sleep before reconnecting; a new request ends the pause (it wants a session now)."""
        if seconds <= 0 or self._requests:
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _lost(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """The session ended: its locks are gone; subscribers drop every epoch at once."""
        self._conn = None
        self.backend_pid = None
        self._held.clear()
        for on_lost in self._on_lost:
            try:
                on_lost()
            except Exception:
                log.exception("an epoch watch subscriber failed on a lost session")
        with contextlib.suppress(Exception):
            await conn.close()
        # Requests in flight are run again on the next session (the subscribers, told of the
        # loss, discard what they loaded under the old one).

    def _fail_requests(self) -> None:
        """No session: a hold fails; a release succeeds (no session holds anything)."""
        while self._requests:
            request = self._requests.popleft()
            if request.done.done():
                continue
            if not request.hold:
                request.done.set_result(True)
            else:
                request.done.set_exception(
                    WatchUnavailableError(
                        "the proxy cannot reach its state database to watch the epoch",
                        hint="check that the state database accepts the proxy's connections",
                    )
                )
