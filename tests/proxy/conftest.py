"""Fixtures for the wire tests: the proxy in front of the embedded PostgreSQL.

The proxy runs on its own event loop in a background thread (``BackgroundServer``) so that
synchronous clients (psql, psycopg2, pg8000) and asynchronous ones (asyncpg, psycopg async)
can all talk to it over TCP, as real clients do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from proxy.wire.auth import AuthConfig, AuthMethod
from proxy.wire.router import ProtectedTablesRouter
from proxy.wire.server import BackgroundServer, ServerConfig
from proxy.wire.upstream import UpstreamConfig

USER = "analyst"
PASSWORD = "analyst-secret"


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    user: str
    password: str
    database: str
    server: BackgroundServer

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def kw(self) -> dict[str, object]:
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": self.database,
        }


def make_config(pg: object, **overrides: object) -> ServerConfig:
    upstream = UpstreamConfig.from_dsn(pg.passthrough_dsn)  # type: ignore[attr-defined]
    auth = overrides.pop("auth", None) or AuthConfig.with_passwords({USER: PASSWORD})
    return ServerConfig(upstream=upstream, auth=auth, **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def proxy(pg: object) -> Iterator[Proxy]:
    cfg = make_config(pg, upstream_database=pg.database)  # type: ignore[attr-defined]
    with BackgroundServer(cfg, TestRouter({"adult"})) as srv:
        yield Proxy("127.0.0.1", srv.port, USER, PASSWORD, pg.database, srv)  # type: ignore[attr-defined]


class TestRouter(ProtectedTablesRouter):
    """The real ProtectedTablesRouter plus one local answer with values, so the tests can
    check encoding and ordering of local answers through real clients: ``SELECT count(*)
    FROM adult WHERE age > $1`` (or a literal) is answered locally with ``1000 + n`` -- a
    stand-in for the DP answer the coordinator plugs in through the same seam."""

    __test__ = False

    def route(self, statement):  # type: ignore[no-untyped-def]
        from proxy.wire.router import AnswerLocally

        sql = " ".join(statement.sql.lower().split())
        if sql == "select 'lapras-bug'":
            raise RuntimeError("lapras-bug: a deliberate router failure")
        if sql.startswith("select count(*) from adult where age >"):
            return AnswerLocally(plan="count")
        return super().route(statement)

    async def execute(self, execution):  # type: ignore[no-untyped-def]
        from proxy.wire.router import LocalResult, Notice

        if execution.route.plan == "count":
            if execution.params:
                n = int(execution.params[0])  # type: ignore[call-overload]
            else:
                n = int(execution.statement.sql.rsplit(">", 1)[1].strip().rstrip(";"))
            if n == 998:
                from dp.errors import BudgetExhaustedError

                raise BudgetExhaustedError("privacy budget exhausted for this epoch")
            if n == 999:  # slow path for cancel tests
                import asyncio

                await asyncio.sleep(30)
            return LocalResult(
                rows=((1000 + n,),), notices=(Notice(message="lapras: local answer"),)
            )
        return await super().execute(execution)


class AsyncTestRouter(TestRouter):
    """The same decisions from a coroutine: the session's task awaits them (no relaying
    from the read callback)."""

    __test__ = False

    async def route(self, statement):  # type: ignore[no-untyped-def]
        return super().route(statement)


@pytest.fixture(scope="session")
def async_router_proxy(pg: object) -> Iterator[Proxy]:
    cfg = make_config(pg, upstream_database=pg.database)  # type: ignore[attr-defined]
    with BackgroundServer(cfg, AsyncTestRouter({"adult"})) as srv:
        yield Proxy("127.0.0.1", srv.port, USER, PASSWORD, pg.database, srv)  # type: ignore[attr-defined]


def assert_cancels(conn: Any, sql: str, cancel: Callable[[], object]) -> None:
    """``sql`` on the psycopg connection ``conn`` ends with 57014 when ``cancel`` runs half a
    second in, well before the statement would end, and the session serves the next one."""
    import psycopg

    timer = threading.Timer(0.5, cancel)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled):
        conn.execute(sql)
    assert time.monotonic() - t0 < 20
    timer.join()
    assert conn.execute("SELECT 1").fetchone() == (1,)


_ = AuthMethod
