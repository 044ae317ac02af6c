"""Helpers of the user-level tests: the Gowalla declaration (with its privacy unit and its
lifetime budget), its configuration for the test backend, and epochs started and closed
through the epoch service (tests/test_user_level.py, tests/ledger/test_lifetime_crash.py)."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections import Counter, defaultdict
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
ROW_LEVEL = re.sub(
    r"(?m)^(privacy_unit|max_rows_per_unit|expected_rows_per_unit|lifetime_\w+) = .*$", "", GOWALLA
)
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


def cell(row: gowalla.Row) -> tuple[int, int, int, int]:
    """The declared cell of a check-in (lat, lon in 10-degree bands, day, hour)."""
    _, _, lat, lon, day, hour = row
    return int((lat + 90) // 10), int((lon + 180) // 10), (day - dt.date(2009, 2, 1)).days, hour


def bounded(rows: list[gowalla.Row], seed: str, rows_per_unit: int, per_cell: int) -> Counter:
    """The bounding of rewriter.histogram, recomputed: per user, the cells in the order of
    md5(seed, user, cell), each giving min(its rows, per_cell) while the bound lasts."""
    per: dict[int, Counter] = defaultdict(Counter)
    for r in rows:
        assert -90 <= r[2] < 90 and -180 <= r[3] < 180
        assert dt.date(2009, 2, 1) <= r[4] <= dt.date(2010, 10, 31)
        per[r[0]][cell(r)] += 1
    out: Counter = Counter()
    for user, cells in per.items():
        left = rows_per_unit
        order = sorted(
            cells,
            key=lambda c, u=user: (
                hashlib.md5((seed + ",".join(map(str, (u, *c)))).encode()).hexdigest(),
                c,
            ),
        )
        for c in order:
            take = min(cells[c], per_cell, left)
            out[c] += take
            left -= take
    return out


def counts(pin: Any) -> Counter:
    """The pin's nonzero counts over the declared attributes, cell -> count (the value
    attributes of clamped columns, rewriter.clamp, summed out)."""
    import numpy as np

    declared = pin.domain.marginal([n for n in pin.domain.names if "#" not in n])
    x = np.rint(pin.marginal(declared))
    out: Counter = Counter()
    for i in np.flatnonzero(x):
        out[tuple(int(c) for c in np.unravel_index(i, declared.shape))] = int(x[i])
    return out
