"""Helpers of the user-level tests: the Gowalla declaration (with its privacy unit and its
lifetime budget), its configuration for the test backend, and epochs started and closed
through the epoch service (tests/test_user_level.py, tests/ledger/test_lifetime_crash.py)."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from epoch_helpers import config_text

import sql_fixtures.gowalla as gowalla
from dp.noise import SeededSampler
from proxy import provision
from proxy.app import admin_service, engine_config
from proxy.config import Config, parse_config

GOWALLA = gowalla.DECLARATION.read_text()
#: The same table declared without a unit: every check-in its own unit.
ROW_LEVEL = re.sub(r"(?m)^(privacy_unit|max_rows_per_unit|lifetime_\w+) = .*$", "", GOWALLA)
BOUND = 50


def protect(pg: Any) -> None:
    """Other tests re-provision the backend for Adult alone, which grants SELECT on every
    other table of public (checkins among them): protect both again, as provisioning does."""
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn, conn.transaction():
        provision.grant_privileges(conn, pg.database, ("public.adult", gowalla.TABLE))


def config(pg: Any, declaration: str = GOWALLA, **privacy: Any) -> Config:
    """A configuration with ``declaration``'s tables (delta 1e-5: within the lifetime's)."""
    return parse_config(
        config_text(pg, declaration=declaration, stream_length=20, delta=1e-5, **privacy),
        "test.toml",
    )


async def start(cfg: Config, table: str, epsilon: float) -> int:
    async with admin_service(cfg, sampler=lambda: SeededSampler(1)) as service:
        return await service.start_epoch(
            table=table,
            config=engine_config(cfg.privacy, epsilon=epsilon),
            actor="pytest",
            reason="lifetime",
        )


async def close(cfg: Config, table: str) -> None:
    async with admin_service(cfg) as service:
        await service.close_epoch(table, actor="pytest", wait=0)
