"""The proxy's configuration file (``lapras.toml``), parsed and validated.

One file holds the server's sections and the protected tables' declaration::

    [server]      listen address, TLS, limits and timeouts
    [backend]     DSNs of the aggregator and passthrough roles, and of the state database
    [[users]]     who may connect to the proxy, and how they authenticate
    [privacy]     the defaults of a new epoch (epsilon, delta, stream length, ...)
    [tables.*]    the protected tables (parsed by ``rewriter.schema``)

Every error names the file, the key and what to write instead (``lapras config check``).
Secrets may be given indirectly: ``password_env = "NAME"`` / ``dsn_env = "NAME"`` read an
environment variable when the configuration is loaded. See docs/configuration.md.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg.conninfo import conninfo_to_dict

from proxy.dp_workers import WorkerLimits, parse_limits
from proxy.provision import AGGREGATOR, PASSTHROUGH, analyst_role, data_database
from rewriter.errors import ConfigError
from rewriter.schema import Schema, schema_from_mapping

AuthMethod = Literal["scram-sha-256", "md5", "password", "trust"]
AUTH_METHODS: tuple[AuthMethod, ...] = ("scram-sha-256", "md5", "password", "trust")
SERVER_SECTIONS = frozenset({"server", "backend", "users", "privacy"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """``[server]``. Admission of clients (proxy.wire.admission, proxy.wire.server):

    * ``login_timeout`` -- seconds from accept to authenticated; then the connection is closed.
    * ``max_pending_logins`` / ``max_pending_logins_per_address`` -- connections not yet
      authenticated, overall / per client address; beyond, the oldest is closed.
    * ``max_connections`` -- authenticated sessions; ``max_user_connections`` -- per user
      (None, the default: its share of ``max_connections`` among the declared users, split
      at most four ways; 0 = no limit); ``reserved_connections`` -- the last slots, kept for
      users without a session (None: a tenth of ``max_connections`` with two users or
      more); ``max_address_connections`` -- per client address (0 = no limit).
    * ``auth_failure_delay`` -- the cap (seconds) of the growing delay before a failed login
      of a user name from an address is answered; 0 = none.

    With ``workers`` > 1 ``max_connections`` and each user's sessions count all workers
    together; the rest are counted in each worker process.

    ``max_statement_size`` -- the longest SQL text (bytes) of a Query or Parse message the
    proxy accepts; a longer one is refused with 54000 before it is split, routed or parsed
    (:data:`STATEMENT_SIZE_BOUNDS`).

    ``dp_workers``, ``dp_statement_timeout``, ``dp_statement_memory`` -- the worker processes
    of DP statements' rewriter work and the limits of one piece of it (proxy.dp_workers).
    """

    host: str = "127.0.0.1"
    port: int = 6432
    max_connections: int = 100
    login_timeout: float = 5.0
    max_pending_logins: int = 100
    # A client host's pool opening its connections at once (asyncpg's min_size is 10,
    # psycopg_pool opens 3 at a time) fits; one address alone cannot fill the overall bound.
    max_pending_logins_per_address: int = 20
    max_user_connections: int | None = None  # None: a share among the users; 0 = none
    reserved_connections: int | None = None  # None: a tenth, with 2+ users
    max_address_connections: int = 0  # 0 = no limit
    auth_failure_delay: float = 5.0  # seconds; 0 = no delay
    idle_session_timeout: float = 0.0  # seconds; 0 = never
    statement_timeout: float = 0.0  # seconds; 0 = never
    tls_cert: Path | None = None
    tls_key: Path | None = None
    shutdown_grace: float = 10.0
    auth: AuthMethod = "scram-sha-256"
    workers: int = 1  # processes serving the port
    max_statement_size: int = 1 << 20  # bytes of SQL text in one Query or Parse
    # pooling of the analysts' backend connections (proxy.wire.pool)
    pool_mode: str = "transaction"  # or "session"
    pool_size: int = 20  # backend connections per pool (user, database, start-up parameters)
    pool_timeout: float = 60.0  # seconds a session waits for a free one
    server_idle_timeout: float = 600.0  # seconds an idle one is kept; 0 = until stop
    # dp_workers, dp_statement_timeout, dp_statement_memory (proxy.dp_workers)
    dp: WorkerLimits = field(default_factory=WorkerLimits)


#: Accepted values of ``[server] max_statement_size`` (bytes). Clients send statements of up to
#: 7.6 KiB on their own (asyncpg's type introspection); classifying a statement over a
#: protected table takes up to about 10 s and 400-800 MB per MiB (docs/benchmarks.md, "Big
#: statements"), which bounds it above.
STATEMENT_SIZE_BOUNDS = (16 * 1024, 16 * 1024 * 1024)

Lockdown = Literal["require", "warn"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendConfig:
    aggregator_dsn: str = field(repr=False)
    passthrough_dsn: str = field(repr=False)
    state_dsn: str | None = field(default=None, repr=False)  # None: the aggregator's database
    lockdown: Lockdown = "require"  # refuse to serve while a route to a statistic is open

    @property
    def data_database(self) -> str:
        """The database analysts' sessions and DP answers come from (the passthrough DSN's)."""
        return data_database(self.passthrough_dsn)

    @property
    def state_database(self) -> str | None:
        """The state database's name; None when ``state_dsn`` is not set."""
        return None if self.state_dsn is None else data_database(self.state_dsn)

    @property
    def ledger_dsn(self) -> str:
        """Where schema ``lapras`` lives: the state database, else (before it was configured)
        the aggregator's own database, which ``lapras provision --check`` reports."""
        return self.state_dsn or self.aggregator_dsn


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    name: str
    password: str | None = field(default=None, repr=False)
    admin: bool = False
    backend_role: str = ""  # the role the user's upstream session runs as


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    source: str
    server: ServerConfig
    backend: BackendConfig
    users: tuple[User, ...]
    privacy: Mapping[str, Any]
    schema: Schema

    def user(self, name: str) -> User | None:
        return next((u for u in self.users if u.name == name), None)

    @property
    def protected_tables(self) -> tuple[str, ...]:
        """Every protected table, as ``schema.table``, then every mapping table a privacy unit
        is reached through (its rows are the units' own: provisioned and checked alike)."""
        tables = [f"{d.schema}.{d.name}" for d in self.schema.tables.values()]
        for d in self.schema.tables.values():
            if d.unit is not None and d.unit.table is not None and d.unit.table not in tables:
                tables.append(d.unit.table)
        return tuple(tables)


class _Section:
    """Typed reads from one TOML table, each error naming file, key and the fix."""

    def __init__(self, source: str, prefix: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: [{prefix}] must be a table")
        self.source, self.prefix, self.data = source, prefix, data

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self.prefix}.{key}: {problem}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        value = self.data.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            raise self.error(key, "must be a number, not true/false")
        if not isinstance(value, kind):
            names = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            raise self.error(key, f"must be of type {names}")
        return value

    def secret(self, key: str) -> str | None:
        """``key = "..."`` or ``key_env = "VAR"`` (the variable must be set)."""
        direct = self.get(key, str)
        var = self.get(f"{key}_env", str)
        if direct is not None and var is not None:
            raise self.error(key, f"give either {key} or {key}_env, not both")
        if var is None:
            return direct  # type: ignore[no-any-return]
        value = os.environ.get(var)
        if value is None:
            raise self.error(f"{key}_env", f"environment variable {var} is not set")
        return value

    def reject_unknown(self, known: set[str]) -> None:
        unknown = sorted(set(self.data) - known)
        if unknown:
            raise self.error(
                unknown[0], f"unknown key; accepted keys are {', '.join(sorted(known))}"
            )


def _server(source: str, data: Any) -> ServerConfig:
    s = _Section(source, "server", data)
    s.reject_unknown(
        {
            "listen",
            "auth",
            "max_connections",
            "login_timeout",
            "max_pending_logins",
            "max_pending_logins_per_address",
            "max_user_connections",
            "reserved_connections",
            "max_address_connections",
            "auth_failure_delay",
            "idle_session_timeout",
            "statement_timeout",
            "tls_cert",
            "tls_key",
            "shutdown_grace",
            "workers",
            "max_statement_size",
            "pool_mode",
            "pool_size",
            "pool_timeout",
            "server_idle_timeout",
            *WorkerLimits.KEYS,
        }
    )
    auth = s.get("auth", str, "scram-sha-256")
    if auth not in AUTH_METHODS:
        raise s.error("auth", f"must be one of {', '.join(AUTH_METHODS)}")
    listen = s.get("listen", str, "127.0.0.1:6432")
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise s.error("listen", 'must be "host:port", for example "127.0.0.1:6432"')
    host = host.strip("[]")
    if auth == "trust" and not _is_loopback(host):
        raise s.error("auth", "trust is only allowed when the server listens on loopback only")
    cert, key = s.get("tls_cert", str), s.get("tls_key", str)
    if (cert is None) != (key is None):
        raise s.error("tls_cert", "tls_cert and tls_key go together: give both or neither")
    numbers = {
        k: float(s.get(k, (int, float), 0)) for k in ("idle_session_timeout", "statement_timeout")
    }
    for k, v in numbers.items():
        if v < 0:
            raise s.error(k, "must be >= 0 seconds (0 = no timeout)")
    max_conn = s.get("max_connections", int, 100)
    if max_conn < 1:
        raise s.error("max_connections", "must be at least 1")
    login_timeout = float(s.get("login_timeout", (int, float), 5.0))
    if login_timeout <= 0:
        raise s.error("login_timeout", "must be > 0 seconds (from connect to authenticated)")
    delay = float(s.get("auth_failure_delay", (int, float), 5.0))
    if delay < 0:
        raise s.error("auth_failure_delay", "must be >= 0 seconds (0 = no delay)")
    counts: dict[str, int] = {}
    for k, default, least in (
        ("max_pending_logins", 100, 1),
        ("max_pending_logins_per_address", 20, 1),
        ("max_address_connections", 0, 0),
    ):
        counts[k] = s.get(k, int, default)
        if counts[k] < least:
            what = "at least 1" if least else ">= 0 (0 = no limit)"
            raise s.error(k, f"must be {what}")
    user_share = s.get("max_user_connections", int)
    if user_share is not None and user_share < 0:
        raise s.error(
            "max_user_connections",
            "must be >= 0 (0 = no limit; without it, each user's share of max_connections)",
        )
    reserved = s.get("reserved_connections", int)
    if reserved is not None and not 0 <= reserved < max_conn:
        raise s.error("reserved_connections", "must be >= 0 and less than max_connections")
    workers = s.get("workers", int, 1)
    if not 1 <= workers <= 64:
        raise s.error("workers", "must be between 1 and 64 (processes serving the port)")
    statement_size = s.get("max_statement_size", int, 1 << 20)
    low, high = STATEMENT_SIZE_BOUNDS
    if not low <= statement_size <= high:
        raise s.error(
            "max_statement_size",
            f"must be between {low} and {high} bytes (16 KiB to 16 MiB; the default is 1 MiB)",
        )
    pool_mode = s.get("pool_mode", str, "transaction")
    if pool_mode not in ("transaction", "session"):
        raise s.error("pool_mode", 'must be "transaction" (the default) or "session"')
    pool_size = s.get("pool_size", int, 20)
    if not 1 <= pool_size <= 10000:
        raise s.error("pool_size", "must be between 1 and 10000 (backend connections per pool)")
    pool_timeout = float(s.get("pool_timeout", (int, float), 60.0))
    if pool_timeout <= 0:
        raise s.error("pool_timeout", "must be > 0 seconds (a session's wait for a connection)")
    idle_keep = float(s.get("server_idle_timeout", (int, float), 600.0))
    if idle_keep < 0:
        raise s.error("server_idle_timeout", "must be >= 0 seconds (0 = keep until stopped)")
    return ServerConfig(
        dp=parse_limits(s.get, s.error),
        host=host,
        pool_mode=pool_mode,
        pool_size=pool_size,
        pool_timeout=pool_timeout,
        server_idle_timeout=idle_keep,
        port=int(port_text),
        max_connections=max_conn,
        login_timeout=login_timeout,
        auth_failure_delay=delay,
        max_pending_logins=counts["max_pending_logins"],
        max_pending_logins_per_address=counts["max_pending_logins_per_address"],
        max_user_connections=user_share,
        reserved_connections=reserved,
        max_address_connections=counts["max_address_connections"],
        tls_cert=Path(cert) if cert else None,
        tls_key=Path(key) if key else None,
        shutdown_grace=float(s.get("shutdown_grace", (int, float), 10.0)),
        auth=auth,
        workers=workers,
        max_statement_size=statement_size,
        **numbers,
    )


def _backend(source: str, data: Any) -> BackendConfig:
    s = _Section(source, "backend", data)
    s.reject_unknown(
        {"aggregator_dsn", "aggregator_dsn_env", "passthrough_dsn", "passthrough_dsn_env",
         "state_dsn", "state_dsn_env", "lockdown"}
    )  # fmt: skip
    dsns = {}
    for role in ("aggregator_dsn", "passthrough_dsn"):
        value = s.secret(role)
        if not value:
            raise s.error(
                role,
                f'missing: the libpq DSN of the {role.split("_")[0]} role (or {role}_env = "VAR")',
            )
        dsns[role] = value
    if dsns["aggregator_dsn"] == dsns["passthrough_dsn"]:
        raise s.error(
            "passthrough_dsn",
            "must differ from aggregator_dsn: the passthrough role must have no SELECT on protected tables",
        )
    try:
        passthrough = conninfo_to_dict(dsns["passthrough_dsn"])
    except psycopg.ProgrammingError:
        raise s.error("passthrough_dsn", "is not a valid libpq connection string") from None
    if not passthrough.get("password"):
        raise s.error(
            "passthrough_dsn",
            "must hold the passthrough role's password: the passwords of the analysts' backend "
            "roles are derived from it (lapras provision)",
        )
    lockdown = s.get("lockdown", str, "require")
    if lockdown not in ("require", "warn"):
        raise s.error("lockdown", 'must be "require" (the default) or "warn"')
    return BackendConfig(**dsns, state_dsn=s.secret("state_dsn"), lockdown=lockdown)


def _users(source: str, data: Any, auth: AuthMethod) -> tuple[User, ...]:
    if data is None:
        raise ConfigError(
            f"{source}: [[users]]: missing: declare at least one user (name, password)"
        )
    if not isinstance(data, list):
        raise ConfigError(f"{source}: users must be an array of tables: [[users]]")
    users: list[User] = []
    for i, item in enumerate(data):
        s = _Section(source, f"users[{i}]", item)
        s.reject_unknown({"name", "password", "password_env", "admin", "backend_role"})
        name = s.get("name", str)
        if not name:
            raise s.error("name", "missing: the user name clients connect with")
        password = s.secret("password")
        if auth != "trust" and not password:
            raise s.error(
                "password", f"missing: server.auth = {auth!r} needs a password (or password_env)"
            )
        if any(u.name == name for u in users):
            raise s.error("name", f"user {name!r} is declared twice")
        role = s.get("backend_role", str) or analyst_role(name)
        if len(role.encode()) > 63:
            raise s.error(
                "backend_role",
                f"the backend role {role!r} is longer than PostgreSQL's 63 bytes: give a shorter one",
            )
        if role in (AGGREGATOR, PASSTHROUGH) or any(u.backend_role == role for u in users):
            raise s.error("backend_role", f"{role!r} must be a role of this user alone")
        users.append(
            User(
                name=name,
                password=password,
                admin=bool(s.get("admin", bool, False)),
                backend_role=role,
            )
        )
    return tuple(users)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_config(text: str, source: str) -> Config:
    """Parse and validate a whole configuration; raise ConfigError naming file and key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    server = _server(source, data.get("server", {}))
    backend = _backend(source, data.get("backend", {}))
    users = _users(source, data.get("users"), server.auth)
    privacy = data.get("privacy", {})
    if not isinstance(privacy, dict):
        raise ConfigError(f"{source}: [privacy] must be a table")
    tables_text = {k: v for k, v in data.items() if k not in SERVER_SECTIONS}
    schema = schema_from_mapping(tables_text, source)
    return Config(
        source=source, server=server, backend=backend, users=users, privacy=privacy, schema=schema
    )


def load_config(path: Path) -> Config:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror}") from None
    return parse_config(text, str(path))
