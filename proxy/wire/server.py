"""The listening server: the only place that accepts sockets; one task per connection.

>>> # server = ProxyServer(ServerConfig(upstream=..., auth=...), router)
>>> # await server.start(); print(server.port); ...; await server.shutdown()

Graceful shutdown (after uvicorn/hypercorn): stop listening, end idle sessions at once with
FATAL 57P01 (as PostgreSQL's fast shutdown), let busy sessions finish their current work for
up to ``grace`` seconds, then cancel them (they too send 57P01 on the way out).

Admission (:mod:`proxy.wire.admission`): a connection is a *pending login* from accept until
it has authenticated, bounded apart from the sessions (a pending login is closed to make room
for a new one) and closed when ``login_timeout`` passes. Only an authenticated client takes a
session slot (within its user's share) and gets its BackendKeyData, so clients that never
finish logging in cannot lock the others out. A failed login leaves the pending logins at once
and is answered after a growing delay; too many failures of one user name from one address in
their delay refuse that name's next login from there.

Several worker processes can serve one port (``[server] workers``, :class:`WorkerSlot`): the
kernel spreads connections over them (``SO_REUSEPORT``), they share the connection limit
through a counter in shared memory, and a CancelRequest that reaches the wrong worker is
passed on, over a Unix socket, to the worker whose session its key names (a session's
BackendKeyData pid encodes its worker). The sessions of each declared user are shared too;
everything else admission counts is counted per worker: the pending logins, the sessions per
address, the failed logins.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import secrets
import struct
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any

from proxy.errors import TooManyConnections
from proxy.wire.admission import (
    Admission,
    default_reserved,
    default_user_share,
    slot_refusal,
)
from proxy.wire.channel import Channel
from proxy.wire.host import ServerConfig, WorkerSlot
from proxy.wire.messages import CANCEL_REQUEST_CODE, CancelRequest
from proxy.wire.pool import Pooler
from proxy.wire.router import StatementRouter
from proxy.wire.session import Session

__all__ = ["BackgroundServer", "ProxyServer", "ServerConfig", "WorkerSlot"]

log = logging.getLogger("lapras.proxy.server")


class ProxyServer:
    def __init__(self, config: ServerConfig, router: StatementRouter) -> None:
        self.config = config
        self.router = router
        self._server: asyncio.Server | None = None
        self._cancels: asyncio.Server | None = None  # cancel requests from the other workers
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sessions: dict[int, Session] = {}
        self._conn_tasks: dict[Session, asyncio.Task[Any]] = {}
        self._closing = False
        self._admission: Admission[Session] = Admission(
            max_pending=config.max_pending_logins,
            max_pending_per_address=config.max_pending_logins_per_address,
            max_address_connections=config.max_address_connections,
            failure_delay=config.auth_failure_delay,
        )
        c, users = config, len(config.auth.users)
        self._user_share = (
            default_user_share(c.max_connections, users)
            if c.max_user_connections is None
            else c.max_user_connections
        )
        self._reserved = (
            default_reserved(c.max_connections, users)
            if c.reserved_connections is None
            else c.reserved_connections
        )
        self._held: set[Session] = set()  # failed logins waiting out their delay
        self.pooler = Pooler(
            mode=config.pool_mode,
            size=config.pool_size,
            timeout=config.pool_timeout,
            idle_timeout=config.server_idle_timeout,
            doors=config.doors,
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        w = self.config.worker
        c = self.config
        self._server = await asyncio.get_running_loop().create_server(
            Channel.accepting(self._on_connect),
            c.host,
            c.port,
            reuse_address=True,
            reuse_port=w is not None,
            # Room in the accept queue for a burst of every session and pending login twice
            # over (PostgreSQL listens with twice max_connections), so that a burst of
            # connections is queued for admission rather than its SYNs dropped and retried
            # a second later; the kernel caps it at net.core.somaxconn.
            backlog=min(4096, max(128, 2 * (c.max_connections + c.max_pending_logins))),
        )
        self.keep(asyncio.create_task(self.pooler.sweep()))
        if w is not None:
            self._cancels = await asyncio.start_unix_server(
                self._on_passed_cancel, w.cancel_socket(w.index)
            )

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def host(self) -> str:
        return self.config.host

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop accepting, end idle sessions now, busy ones after ``grace`` seconds."""
        grace = self.config.shutdown_grace if grace is None else grace
        self._closing = True
        if self._server is not None:
            self._server.close()
        if self._cancels is not None:
            self._cancels.close()
        for s, t in list(self._conn_tasks.items()):
            s.stop_requested = True
            if s.idle_reading or not s.registered:
                _stop(t)
        pending = [t for t in self._conn_tasks.values() if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for t in still:
                t.cancel()
            if still:
                await asyncio.wait(still, timeout=5.0)
        for t in list(self._tasks):
            t.cancel()
        await self.pooler.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)

    # -- connections ---------------------------------------------------------------------

    def _on_connect(self, client: Channel) -> None:
        """A connection accepted (from its protocol's ``connection_made``): its session, its
        admission as a pending login, and the task that serves it (the one coroutine an idle
        session keeps)."""
        if self._closing:
            client.transport.close()
            return
        peer = client.transport.get_extra_info("peername")
        session = Session(self, client, address=sys.intern(str(peer[0])) if peer else "")
        closed = self._admission.arrive(
            session, session.address, now=time.monotonic(), heard=_heard
        )
        for old in closed:
            self._evict(old)
        self._conn_tasks[session] = asyncio.get_running_loop().create_task(session.run())

    def ended(self, session: Session) -> None:
        self._conn_tasks.pop(session, None)
        self._held.discard(session)

    # -- admission (proxy.wire.admission) -----------------------------------------------

    def claim(self, session: Session) -> str | None:
        """``session`` gave its user name: why its login is refused (too many failures of
        that name from its address in their delay), or None."""
        refusal, closed = self._admission.claim(session, session.user, now=time.monotonic())
        for old in closed:
            self._evict(old)
        return refusal

    def login_failed(self, session: Session) -> float:
        """``session``'s authentication failed: it leaves the pending logins, and the
        seconds to wait before answering it are returned. Its guess counts in the backoff
        either way; only the wait is skipped once ``max_pending_logins`` failed logins are
        waiting already (each keeps its socket open)."""
        delay = self._admission.failed(session, session.address, session.user, now=time.monotonic())
        if delay <= 0 or len(self._held) >= self.config.max_pending_logins:
            return 0.0
        self._held.add(session)
        return delay

    def _evict(self, session: Session) -> None:
        """Close a pending login to make room for a newer one (its task says why)."""
        log.debug("closing the oldest pending login from %s to make room", session.address)
        session.evicted = True
        task = self._conn_tasks.get(session)
        if task is not None:
            _stop(task)

    def leave_pending(self, session: Session) -> None:
        self._admission.leave(session)

    def register(self, session: Session) -> None:
        """Admit an authenticated session: it stops being a pending login, takes a session
        slot and gets its BackendKeyData pid. Raises TooManyConnections (53300) at a limit."""
        self._admission.leave(session)
        self._admission.backoff.succeeded(session.address, session.user)
        refusal = self._admission.address_refusal(session.address)
        if refusal is None and self._closing:
            refusal = "sorry, too many clients already"
        if refusal is None:
            refusal = self._take_slot(session.user)
        if refusal is not None:
            raise TooManyConnections(refusal)
        self._admission.open_session(session.user, session.address)
        w = self.config.worker
        count, index = (w.count, w.index) if w is not None else (1, 0)
        while True:
            # Our own pid with the sign bit clear (PgBouncer does the same; pg_basebackup
            # and others treat a negative pid as an error), naming this worker.
            pid = secrets.randbelow((2**31 - 2) // count) * count + index + 1
            if pid not in self._sessions:
                break
        session.pid = pid
        self._sessions[pid] = session
        session.registered = True

    def _take_slot(self, user: str) -> str | None:
        """Take a session slot for ``user`` (proxy.wire.admission.slot_refusal), or say why
        not. With several workers the slots, and the sessions of each declared user, are
        counted across all of them."""
        c = self.config
        w = c.worker
        limits = {
            "max_connections": c.max_connections,
            "max_user": self._user_share,
            "reserved": self._reserved,
        }
        if w is None:
            total, mine = len(self._sessions), self._admission.sessions_of(user)
            return slot_refusal(user, total=total, mine=mine, **limits)
        index = w.user_index(user)
        with w.connections.get_lock():
            total = w.connections.value
            mine = self._admission.sessions_of(user) if index is None else w.users[index]
            refusal = slot_refusal(user, total=total, mine=mine, **limits)
            if refusal is None:
                w.connections.value += 1
                if index is not None:
                    w.users[index] += 1
            return refusal

    def unregister(self, session: Session) -> None:
        if self._sessions.get(session.pid) is session:
            del self._sessions[session.pid]
            self._admission.close_session(session.user, session.address)
            w = self.config.worker
            if w is not None:
                index = w.user_index(session.user)
                with w.connections.get_lock():
                    w.connections.value -= 1
                    if index is not None:
                        w.users[index] -= 1

    async def cancel(self, pid: int, key: int) -> None:
        """Cancel the session with this BackendKeyData; a wrong key is ignored silently."""
        w = self.config.worker
        if w is not None and w.owner(pid) != w.index:
            await _pass_cancel(w.cancel_socket(w.owner(pid)), pid, key)
            return
        s = self._sessions.get(pid)
        if s is not None and secrets.compare_digest(
            key.to_bytes(4, "big"), s.key.to_bytes(4, "big")
        ):
            s.cancel()

    async def _on_passed_cancel(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A CancelRequest another worker received for one of our sessions."""
        try:
            data = await asyncio.wait_for(reader.readexactly(16), 5.0)
            length, code, pid, key = struct.unpack("!iiiI", data)
            w = self.config.worker
            if length == 16 and code == CANCEL_REQUEST_CODE and w and w.owner(pid) == w.index:
                await self.cancel(pid, key)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    @property
    def pending_count(self) -> int:
        """Connections not yet authenticated (pending logins), in this process."""
        return self._admission.pending_count

    def pending_from(self, address: str) -> int:
        return self._admission.pending_from(address)


class BackgroundServer:
    """A ProxyServer on its own event loop in a daemon thread (for synchronous clients and
    tests): ``with BackgroundServer(config, router) as srv: connect to srv.port``."""

    def __init__(self, config: ServerConfig, router: StatementRouter) -> None:
        self.server = ProxyServer(config, router)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="lapras-proxy", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as e:
            self._error = e
            self._started.set()
            return
        self._started.set()
        self.loop.run_forever()

    def start(self) -> BackgroundServer:
        self._thread.start()
        self._started.wait(30)
        if self._error is not None:
            raise self._error
        return self

    @property
    def port(self) -> int:
        return self.server.port

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, grace: float = 2.0) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self.call(self.server.shutdown(grace), timeout=grace + 15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _pass_cancel(path: str, pid: int, key: int) -> None:
    """Hand a CancelRequest to the worker listening on ``path`` (silently, like a cancel)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), 2.0)
    except (OSError, TimeoutError):
        return
    try:
        writer.write(CancelRequest(pid=pid, key=key).encode())
        await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def _heard(session: Session) -> bool:
    return session.conn.heard


def _stop(task: asyncio.Task[Any]) -> None:
    """Cancel a session's task. One that has not started is left to start: a coroutine
    cancelled before its first step never runs, so its session would never close; as it
    starts, the session finds itself evicted or asked to stop and goes as if cancelled."""
    if inspect.getcoroutinestate(task.get_coro()) != inspect.CORO_CREATED:  # type: ignore[arg-type]
        task.cancel()
