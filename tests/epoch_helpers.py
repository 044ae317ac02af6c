"""Helpers of the tests that run the whole proxy: a configuration for the test backend, a
fresh ledger, an epoch started through the epoch service (tests/test_end_to_end.py and
tests/ledger/)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

import sql_fixtures.adult as adult
from dp.noise import SeededSampler
from proxy.app import admin_service, engine_config
from proxy.config import Config

ANALYST = ("analyst", "secret")
ADMIN = ("root", "admin-secret")
DASHBOARD = [
    "SELECT sex, count(*) FROM adult GROUP BY sex",
    "SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT income, count(*) FROM adult GROUP BY income",
]


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def config_text(pg: Any, **privacy: Any) -> str:
    """A whole lapras.toml for the test backend: Adult protected, an analyst and an admin."""
    settings = {
        "epsilon": 1.0,
        "delta": 1e-3,
        "stream_length": 50,
        "view": "age_sex_income",
        **privacy,
    }
    lines = "\n".join(f"{k} = {_toml(v)}" for k, v in settings.items())
    return (
        adult.DECLARATION.read_text()
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


def start_epoch(config: Config, predicted: list[str], seed: int = 1, **overrides: Any) -> int:
    async def go() -> int:
        async with admin_service(config, sampler=lambda: SeededSampler(seed)) as service:
            return await service.start_epoch(
                table="adult",
                view="age_sex_income",
                config=engine_config(config.privacy, **overrides),
                predicted=predicted,
                actor="pytest",
                reason="pytest",
            )

    return asyncio.run(go())
