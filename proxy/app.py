"""Assembling the proxy from a configuration: ledger, epoch service, router, wire server.

>>> # async with running(config) as app:   # doctest: +SKIP
>>> #     print(app.server.port)
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import hashlib
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from dp import engine, engine_codec
from dp.errors import LaprasError, PrivacyParameterError
from dp.noise import Sampler, SecureSampler
from proxy import doors, provision
from proxy.admin import AdminSources
from proxy.config import Config
from proxy.dp_router import LOG_DAYS, LOG_ROWS, DPRouter
from proxy.epoch_watch import EpochWatch
from proxy.epochs import EpochService
from proxy.ledger import PgLedger
from proxy.wire.auth import AuthConfig, AuthMethod, UserCredential
from proxy.wire.pool import PoolMode
from proxy.wire.server import ProxyServer, ServerConfig, WorkerSlot
from proxy.wire.upstream import UpstreamConfig
from rewriter.errors import ConfigError

log = logging.getLogger("lapras.app")

#: Keys of [privacy] that map onto dp.engine.EngineConfig.
ENGINE_KEYS = engine_codec.CONFIG_FIELDS
PRIVACY_DEFAULTS: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-3, "stream_length": 1000}
#: Keys of [privacy] the proxy itself reads (not an epoch's engine).
PROXY_KEYS = ("view", "log_sql", "query_log_days", "query_log_rows", "reveal_sources")


def log_retention(privacy: dict[str, Any]) -> tuple[float, int]:
    """([privacy] query_log_days, query_log_rows), validated (ConfigError names the key)."""
    days = privacy.get("query_log_days", LOG_DAYS)
    rows = privacy.get("query_log_rows", LOG_ROWS)
    if isinstance(days, bool) or not isinstance(days, int | float) or not 0 < days < 1e6:
        raise ConfigError("privacy.query_log_days: must be a number of days greater than 0")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1000:
        raise ConfigError("privacy.query_log_rows: must be an integer of at least 1000")
    return float(days), rows


def engine_config(privacy: dict[str, Any], **overrides: Any) -> engine.EngineConfig:
    """The EngineConfig of a new epoch: [privacy] defaults, then explicit overrides."""
    unknown = sorted(set(privacy) - set(ENGINE_KEYS) - set(PROXY_KEYS))
    if unknown:
        raise PrivacyParameterError(
            f"[privacy] has an unknown key {unknown[0]!r}",
            hint=f"accepted keys: {', '.join((*ENGINE_KEYS, *PROXY_KEYS))}",
        )
    values = {**PRIVACY_DEFAULTS, **{k: v for k, v in privacy.items() if k in ENGINE_KEYS}}
    values.update({k: v for k, v in overrides.items() if v is not None})
    if isinstance(values.get("split"), list):
        values["split"] = tuple(values["split"])
    return engine.EngineConfig(**values)


def auth_secret(config: Config) -> bytes:
    """The secret that derives the SCRAM salts and the mock exchange (proxy.wire.auth): the
    same in every worker and across restarts, so a user name's salt never changes, yet unknown
    to clients. It comes from a secret the configuration already holds -- the aggregator DSN,
    which carries that role's password -- under a label of its own."""
    label = b"lapras proxy: SCRAM salt secret v1\0"
    return hashlib.sha256(label + config.backend.aggregator_dsn.encode()).digest()


def _auth(config: Config) -> AuthConfig:
    method = AuthMethod(config.server.auth)
    secret = auth_secret(config)
    if method is AuthMethod.TRUST:
        users = {u.name: UserCredential() for u in config.users}
        return AuthConfig(method=method, users=users, secret=secret)
    passwords = {u.name: u.password or "" for u in config.users}
    return AuthConfig.with_passwords(passwords, method, secret=secret)


def _upstreams(config: Config) -> tuple[UpstreamConfig, dict[str, UpstreamConfig]]:
    """The passthrough connection's settings, and each user's own backend role on them."""
    base = UpstreamConfig.from_dsn(config.backend.passthrough_dsn)
    secret = base.password or ""
    users = {
        u.name: dataclasses.replace(
            base, user=u.backend_role, password=provision.analyst_password(secret, u.backend_role)
        )
        for u in config.users
    }
    return base, users


class LockdownError(LaprasError):
    """55000: the backend still lets analysts reach an exact statistic (``lapras serve``
    refuses to start; ``[backend] lockdown = "warn"`` serves anyway)."""

    sqlstate = "55000"


def lockdown_findings(config: Config, *, verify: bool = False) -> list[provision.Finding]:
    """The routes to exact statistics still open on the configured backend, and the ways
    around the proxy; ``verify``: also log in as each analyst role with the proxy's password,
    its door opened for the attempt (``lapras provision --check``; ``lapras serve`` needs not:
    it sets the password itself at every login)."""

    def logs_in(role: str) -> bool:
        return doors.verify_login(config.backend.ledger_dsn, analyst_dsn(config, role), role)

    with psycopg.connect(config.backend.aggregator_dsn, connect_timeout=10) as conn:
        return provision.check(
            conn,
            protected=config.protected_tables,
            roles=[u.backend_role for u in config.users],
            data_database=config.backend.data_database,
            state_database=config.backend.state_database,
            verify=logs_in if verify else None,
        )


def analyst_dsn(config: Config, role: str) -> str:
    """The libpq DSN the proxy logs in to the data database with as analyst role ``role``."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    base = config.backend.passthrough_dsn
    secret = str(conninfo_to_dict(base).get("password") or "")
    return make_conninfo(base, user=role, password=provision.analyst_password(secret, role))


def _doors(config: Config) -> doors.Doors:
    """What opens each analyst role's login for the proxy's own (proxy/doors.py)."""
    _, users = _upstreams(config)
    verifiers = {u.user: doors.scram_verifier(u.password or "") for u in users.values()}
    return doors.Doors(config.backend.ledger_dsn, verifiers)


def enforce_lockdown(config: Config) -> None:
    """Refuse to serve while a route is open (or log it, with ``lockdown = "warn"``)."""
    findings = lockdown_findings(config)
    if not findings:
        return
    lines = "\n".join(f"  - {f}" for f in findings)
    if config.backend.lockdown == "warn":
        log.warning("serving with %d open route(s) to exact statistics:\n%s", len(findings), lines)
        return
    raise LockdownError(
        f"the backend lets analysts reach exact statistics ({len(findings)} open route(s)):\n{lines}",
        hint="an administrator runs: lapras provision --config <this file> (docs/admin.md); "
        '[backend] lockdown = "warn" serves with the proxy\'s own checks alone',
    )


def _ssl(config: Config) -> ssl.SSLContext | None:
    if config.server.tls_cert is None or config.server.tls_key is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(config.server.tls_cert), str(config.server.tls_key))
    return ctx


@dataclass(slots=True)
class App:
    config: Config
    ledger: PgLedger
    service: EpochService
    router: DPRouter
    server: ProxyServer
    watch: EpochWatch


@asynccontextmanager
async def running(
    config: Config,
    *,
    sampler: Callable[[], Sampler] = SecureSampler,
    worker: WorkerSlot | None = None,
) -> AsyncIterator[App]:
    """Start everything the configuration describes; stop it all on exit. ``worker``: this
    process is one of several serving the port (``lapras serve`` with ``workers > 1``)."""
    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # sqlglot warns on what we refuse
    if worker is None:  # a group of workers is checked once, by the process that starts them
        await asyncio.to_thread(enforce_lockdown, config)
    ledger = await PgLedger.connect(config.backend.ledger_dsn)
    gates = _doors(config)
    # The process's watch session (proxy/epoch_watch.py): listening before any epoch is loaded,
    # so that a close drops the epoch from memory at once.
    watch = ledger.watch()
    try:
        await watch.start()
        service = EpochService(
            schema=config.schema,
            ledger=ledger,
            aggregator_dsn=config.backend.aggregator_dsn,
            sampler=sampler,
            watch=watch,
            public_dsn=config.backend.passthrough_dsn,
        )
        router = DPRouter(
            service,
            log_sql=bool(config.privacy.get("log_sql", False)),
            log_retention=log_retention(dict(config.privacy)),
            reveal_sources=bool(config.privacy.get("reveal_sources", False)),
            admins=frozenset(u.name for u in config.users if u.admin),
            limits=config.server.dp,
        )
        s = config.server
        upstream, upstream_users = _upstreams(config)
        server = ProxyServer(
            ServerConfig(
                upstream=upstream,
                upstream_users=upstream_users,
                auth=_auth(config),
                host=s.host,
                port=s.port,
                max_connections=s.max_connections,
                login_timeout=s.login_timeout,
                max_pending_logins=s.max_pending_logins,
                max_pending_logins_per_address=s.max_pending_logins_per_address,
                max_user_connections=s.max_user_connections,
                reserved_connections=s.reserved_connections,
                max_address_connections=s.max_address_connections,
                auth_failure_delay=s.auth_failure_delay,
                idle_session_timeout=s.idle_session_timeout or None,
                statement_timeout=s.statement_timeout or None,
                max_statement_size=s.max_statement_size,
                ssl_context=_ssl(config),
                shutdown_grace=s.shutdown_grace,
                worker=worker,
                doors=gates,
                pool_mode=PoolMode(s.pool_mode),
                pool_size=s.pool_size,
                pool_timeout=s.pool_timeout,
                server_idle_timeout=s.server_idle_timeout,
            ),
            router,
        )
        router.admin_sources = AdminSources(service, server.pooler.stats)
        # Every active epoch is loaded before the port accepts anything (the first DP
        # statement would otherwise replay the ledger while its session waits).
        await service.warm()
        await router.start()  # the DP worker processes (proxy.dp_workers)
        try:
            await server.start()
        except BaseException:
            router.close()
            raise
        try:
            yield App(
                config=config,
                ledger=ledger,
                service=service,
                router=router,
                server=server,
                watch=watch,
            )
        finally:
            await server.shutdown(grace=s.shutdown_grace)
            await router.drain()
    finally:
        await watch.close()
        await gates.close()
        await ledger.close()


def settle_heap() -> None:
    """For a serving process, once :func:`running` has started: put what start-up made (the
    modules, the parsers' tables, the loaded epochs: most of the process's objects, alive
    until it exits) out of the cyclic collector's reach (``gc.freeze``), so that its full
    collections under load walk only what serving made since. A full collection holds the
    interpreter, and with it every session of the process: 44-130 ms each under 50 clients'
    fresh DP load on Adult, 5-49 ms once the start-up objects are frozen
    (docs/benchmarks.md). A frozen object is still freed by reference counting; only one
    left in a reference cycle would stay, which is why only the server processes call this
    (not tests, which start many apps in one process)."""
    gc.collect()
    gc.freeze()


@asynccontextmanager
async def admin_service(
    config: Config, *, sampler: Callable[[], Sampler] = SecureSampler
) -> AsyncIterator[EpochService]:
    """The epoch service alone (for the admin commands): no server is started, and no watch
    (a command is over before a close could matter to it)."""
    ledger = await PgLedger.connect(config.backend.ledger_dsn)
    try:
        yield EpochService(
            schema=config.schema,
            ledger=ledger,
            aggregator_dsn=config.backend.aggregator_dsn,
            sampler=sampler,
        )
    finally:
        await ledger.close()
