"""What a session asks of the server that accepted it, below both (no import circle).

:class:`ServerConfig` (the wire server's settings), :class:`WorkerSlot` (this process's place
among the proxy's workers) and :class:`SessionHost`, the services a session uses:
admission (:mod:`proxy.wire.admission`: a pending login, then a session slot), cancel
requests, background tasks and the statement router. :class:`proxy.wire.server.ProxyServer`
is one; the session knows it only by this protocol.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from proxy.wire.auth import AuthConfig
from proxy.wire.messages import DEFAULT_MAX_MESSAGE
from proxy.wire.pool import LoginDoors, Pooler, PoolMode
from proxy.wire.router import StatementRouter
from proxy.wire.upstream import UpstreamConfig

S_contra = TypeVar("S_contra", contravariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSlot:
    """This process's place among the proxy's worker processes."""

    index: int  # 0 .. count - 1
    count: int
    sockets: str  # the group's folder of cancel sockets
    connections: Any  # multiprocessing.Value("i"): sessions open in the whole group
    # The declared users, and a multiprocessing.Array("i", len(users), lock=False) of each
    # one's sessions in the whole group (guarded by the lock of ``connections``).
    user_names: tuple[str, ...] = ()
    users: Any = None

    def user_index(self, user: str) -> int | None:
        """The place of ``user`` in ``users``; None when its sessions are not shared."""
        if self.users is None or user not in self.user_names:
            return None
        return self.user_names.index(user)

    def cancel_socket(self, index: int) -> str:
        return os.path.join(self.sockets, f"cancel-{index}.sock")

    def owner(self, pid: int) -> int:
        """The worker whose session has this BackendKeyData pid."""
        return (pid - 1) % self.count


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """The wire server's settings.

    Admission (see :mod:`proxy.wire.admission`; with several workers ``max_connections`` and
    the sessions of each declared user are counted across them, the other counts per worker
    process):

    * ``login_timeout`` -- seconds from accept to authenticated, one deadline for the whole
      start-up (not per read); then the connection is closed without a message, as PostgreSQL
      does at ``authentication_timeout`` (it logs "canceling authentication due to timeout").
    * ``max_pending_logins`` / ``max_pending_logins_per_address`` -- connections not yet
      authenticated, overall and per client address; a new one beyond a bound closes the
      oldest (of its address for the per-address bound).
    * ``max_connections`` -- authenticated sessions ("sorry, too many clients already");
      ``max_user_connections`` -- per user (None: its share of ``max_connections`` among
      the users of ``auth``, split at most four ways; 0 = no limit);
      ``reserved_connections`` -- the last slots, only for users without a session (None: a
      tenth of ``max_connections`` with two users or more); ``max_address_connections`` --
      per client address (0 = no limit); each refusal is FATAL 53300.
    * ``auth_failure_delay`` -- the cap, in seconds, of the delay before a failed login is
      answered (0.1 s, doubling per consecutive failure of its user name from its address);
      0 = no delay. A quarter of ``max_pending_logins_per_address`` such failures of one name
      and address in their delay refuse that name's next login from there.

    Pooling (:mod:`proxy.wire.pool`): ``pool_mode`` (transaction or session), ``pool_size``
    backend connections per pool at most, ``pool_timeout`` seconds a session waits for one,
    ``server_idle_timeout`` seconds an idle one is kept (0 = until the proxy stops).

    ``max_statement_size`` -- the longest SQL text, in bytes, of a Query or a Parse: a longer
    one is refused (54000) before it is split, routed or parsed, and the session goes on.
    """

    upstream: UpstreamConfig
    auth: AuthConfig
    # Each user's own backend role (ARCHITECTURE.md §4: analysts cannot see or act on each
    # other's sessions); a user without one logs in upstream as ``upstream``.
    upstream_users: Mapping[str, UpstreamConfig] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0  # 0 = any free port; see ProxyServer.port
    max_connections: int = 100
    max_message_size: int = DEFAULT_MAX_MESSAGE
    max_statement_size: int = 1 << 20
    login_timeout: float = 5.0  # from accept to authenticated (PostgreSQL's is 60 s)
    max_pending_logins: int = 100
    max_pending_logins_per_address: int = 20
    max_user_connections: int | None = None  # None: a share among the users; 0 = none
    reserved_connections: int | None = None  # None: a tenth, with 2+ users
    max_address_connections: int = 0  # 0 = no limit
    auth_failure_delay: float = 5.0  # seconds, the backoff's cap; 0 = none
    idle_session_timeout: float | None = None
    idle_in_transaction_timeout: float | None = None
    statement_timeout: float | None = None  # local answers; also set upstream
    ssl_context: ssl.SSLContext | None = None  # answer SSLRequest with 'S' when set
    upstream_database: str | None = None  # None: the client's database
    shutdown_grace: float = 5.0
    worker: WorkerSlot | None = None  # one of several processes serving the port
    # opens each analyst role's login for the proxy's own (proxy.doors); None: logins as is
    doors: LoginDoors | None = None
    pool_mode: PoolMode = PoolMode.TRANSACTION
    pool_size: int = 20
    pool_timeout: float = 60.0
    server_idle_timeout: float = 600.0

    def upstream_for(self, user: str) -> UpstreamConfig:
        return self.upstream_users.get(user, self.upstream)


class SessionHost(Protocol[S_contra]):
    """The server's side of its sessions (``S_contra``: the session type)."""

    @property
    def config(self) -> ServerConfig: ...

    @property
    def router(self) -> StatementRouter: ...

    @property
    def pooler(self) -> Pooler: ...

    def register(self, session: S_contra) -> None:
        """Admit an authenticated session (a slot, its BackendKeyData pid); raises
        TooManyConnections (53300) at a limit."""

    def unregister(self, session: S_contra) -> None: ...

    def leave_pending(self, session: S_contra) -> None: ...

    def ended(self, session: S_contra) -> None:
        """The session's task ends now (the last step of its close)."""

    def claim(self, session: S_contra) -> str | None:
        """The session gave its user name: why its login is refused (53300), or None."""
        ...

    def login_failed(self, session: S_contra) -> float:
        """The seconds to wait before answering a failed login."""
        ...

    async def cancel(self, pid: int, key: int) -> None: ...

    def keep(self, task: asyncio.Task[Any]) -> None:
        """Keep a background task alive until it is done."""
