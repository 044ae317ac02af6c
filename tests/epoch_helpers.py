"""Helpers of the tests that run the whole proxy: a configuration for the test backend, a
fresh ledger, an epoch started through the epoch service, the proxy in-process
(tests/test_end_to_end.py and tests/ledger/)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg

import sql_fixtures.adult as adult
from dp.noise import SeededSampler
from proxy.app import App, admin_service, engine_config, running
from proxy.config import Config

ANALYST = ("analyst", "secret")
ADMIN = ("root", "admin-secret")
DASHBOARD = [
    "SELECT sex, count(*) FROM adult GROUP BY sex",
    "SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT income, count(*) FROM adult GROUP BY income",
]


class ZeroSampler:
    """No noise at all: a DP answer is the exact answer of the (bounded) data (tests only)."""

    def gaussian(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(size)

    def laplace(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(size)


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def config_text(pg: Any, *, declaration: str | None = None, **privacy: Any) -> str:
    """A whole lapras.toml for the test backend: Adult protected (or the tables of
    ``declaration``), an analyst and an admin."""
    settings = {
        "epsilon": 1.0,
        "delta": 1e-3,
        "stream_length": 50,
        # the tests read from the NOTICE how each answer was made (None: the product default)
        "reveal_sources": True,
        **privacy,
    }
    lines = "\n".join(f"{k} = {_toml(v)}" for k, v in settings.items() if v is not None)
    return (
        (adult.DECLARATION.read_text() if declaration is None else declaration)
        + f"""
[server]
listen = "127.0.0.1:0"
shutdown_grace = 1

[backend]
aggregator_dsn = "{pg.aggregator_dsn}"
passthrough_dsn = "{pg.passthrough_dsn}"
state_dsn = "{pg.state_dsn}"

[[users]]
name = "{ANALYST[0]}"
password = "{ANALYST[1]}"

[[users]]
name = "{ADMIN[0]}"
password = "{ADMIN[1]}"
admin = true

[privacy]
{lines}
"""
    )


def reset_ledger(pg: Any) -> None:
    with psycopg.connect(pg.state_admin_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS lapras CASCADE")


def start_epoch(
    config: Config,
    predicted: list[str],
    seed: int = 1,
    *,
    view: str | None = None,
    table: str = "adult",
    **overrides: Any,
) -> int:
    """Start an epoch on ``table``, over the whole table (or restricted to ``view``)."""

    async def go() -> int:
        async with admin_service(config, sampler=lambda: SeededSampler(seed)) as service:
            return await service.start_epoch(
                table=table,
                view=view,
                config=engine_config(config.privacy, **overrides),
                predicted=predicted,
                actor="pytest",
                reason="pytest",
            )

    return asyncio.run(go())


class Proxy:
    """The whole proxy (``proxy.app.running``) on its own event loop in a thread. ``seed``:
    a seeded sampler (each draw its own seed); None: the production sampler, or ``sampler``."""

    def __init__(
        self, config: Config, seed: int | None = None, sampler: Callable[[], Any] | None = None
    ) -> None:
        self.config = config
        self.seed = seed
        self.sampler = sampler
        self.loop = asyncio.new_event_loop()
        self.app: App | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self._main(),), daemon=True
        )

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        extra: dict[str, Any] = {}
        if self.seed is not None:
            counter, seed = itertools.count(), self.seed
            extra["sampler"] = lambda: SeededSampler(seed * 1000 + next(counter))
        elif self.sampler is not None:
            extra["sampler"] = self.sampler
        async with running(self.config, **extra) as app:
            self.app = app
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Proxy:
        self._thread.start()
        assert self._ready.wait(60), "the proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    @property
    def port(self) -> int:
        assert self.app is not None
        return self.app.server.port

    @property
    def dsn(self) -> str:
        """The analyst's connection string."""
        return f"postgresql://{ANALYST[0]}:{ANALYST[1]}@127.0.0.1:{self.port}/lapras_test"


@contextmanager
def client(proxy: Proxy) -> Iterator[tuple[psycopg.Connection[Any], list[str]]]:
    notices: list[str] = []
    with psycopg.connect(proxy.dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        yield conn, notices
