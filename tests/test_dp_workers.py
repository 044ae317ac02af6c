"""DP statements' rewriter work in worker processes (proxy.dp_workers): limits of time and
memory, the quick and heavy lanes, the users' turns, and the refusals through the proxy --
at once when the predicted work is above the limit (54000, rewriter.cost), 57014 when the
work runs past it, with the charge said when the answer was already made.

No timing is asserted: a piece of work that must be stopped is made to last far longer than
its limit (a sum over 10**13 numbers, a sleep of a minute, a 4 GB allocation).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch

import rewriter
from proxy import cli
from proxy.config import Config, parse_config
from proxy.dp_workers import (
    QUICK_UNITS,
    DPWorkers,
    Lane,
    StatementTimeout,
    WorkerLimits,
    WorkerOutOfMemory,
    classify_text,
)
from rewriter.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = rewriter.load_schema(ROOT / "sql_fixtures" / "adult" / "lapras.toml")
HEAVY = QUICK_UNITS + 1  # predicted above the quick lane's budget: the heavy lane at once
FOREVER = range(10**13)  # sum() over it: CPU-bound for hours


# --- the pool itself ------------------------------------------------------------------------


async def test_work_past_its_cpu_time_is_stopped_and_the_pool_goes_on() -> None:
    pool = DPWorkers(SCHEMA, WorkerLimits(workers=1, timeout=0.2))
    try:
        with pytest.raises(StatementTimeout) as info:
            await pool.run(sum, FOREVER, user="a", units=HEAVY)
        err = info.value
        assert err.sqlstate == "57014"
        assert "statement timeout" in err.message
        assert "dp_statement_timeout" in (err.detail or "") and "dp_statement_timeout" in (
            err.hint or ""
        )
        # a process that gets no CPU at all is stopped by the wall-clock bound
        with pytest.raises(StatementTimeout):
            await pool.run(time.sleep, 60, user="a", units=HEAVY)
        # the stopped processes were replaced: the lanes answer again
        assert await pool.run(sum, range(10), user="a", units=HEAVY) == 45
        assert await pool.run(sum, range(10), user="a") == 45
    finally:
        pool.close()


async def test_the_quick_lane_hands_long_work_to_the_heavy_lane() -> None:
    pool = DPWorkers(SCHEMA, WorkerLimits(workers=1, timeout=1))
    try:
        # predicted small, but it runs past the quick lane's own limit: run again, heavy
        with pytest.raises(StatementTimeout):
            await pool.run(sum, FOREVER, user="a")
        assert pool.finished == {Lane.QUICK: 0, Lane.HEAVY: 0}
        # a classification predicted above the quick lane's budget is handed over too
        # (WorkLimitError with escalate), and answered there
        sql = "SELECT count(*) FROM adult WHERE age * hours_per_week + education_num > 1000"
        [st] = await pool.run(classify_text, sql, SCHEMA, user="a")
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None
        assert pool.finished == {Lane.QUICK: 1, Lane.HEAVY: 1}
        # the statement came back referring to this process's own declaration
        assert st.prepared.table is SCHEMA.tables["adult"]
    finally:
        pool.close()


async def test_a_process_stopped_as_it_replied_is_not_given_more_work() -> None:
    # a limit no work fits: each process is stopped, often just after it sent its reply
    pool = DPWorkers(SCHEMA, WorkerLimits(workers=1, timeout=10))
    try:
        for _ in range(20):
            pool.heavy.seconds = 1e-9
            with contextlib.suppress(StatementTimeout):
                assert await pool.run(sum, range(10), user="a", units=HEAVY) == 45
            pool.heavy.seconds = 10
            assert await pool.run(sum, range(10), user="a", units=HEAVY) == 45
    finally:
        pool.close()


async def test_work_past_its_memory_fails_with_53200_and_the_pool_goes_on() -> None:
    pool = DPWorkers(SCHEMA, WorkerLimits(workers=1, timeout=10, memory_mb=256))
    try:
        with pytest.raises(WorkerOutOfMemory) as info:
            await pool.run(bytearray, 4 << 30, user="a", units=HEAVY)
        assert info.value.sqlstate == "53200"
        assert "dp_statement_memory" in (info.value.detail or "")
        assert len(await pool.run(bytearray, 1 << 20, user="a", units=HEAVY)) == 1 << 20
    finally:
        pool.close()


async def test_queued_work_is_taken_user_by_user() -> None:
    pool = DPWorkers(SCHEMA, WorkerLimits(workers=1, timeout=10))
    await pool.start()
    order: list[str] = []

    async def job(user: str, name: str) -> None:
        await pool.run(time.sleep, 0.2, user=user, units=HEAVY)
        order.append(name)

    try:
        first = asyncio.create_task(job("a", "a1"))
        await asyncio.sleep(0.05)  # a1 runs; the next ones queue
        rest = [asyncio.create_task(job(u, n)) for u, n in [("a", "a2"), ("a", "a3")]]
        await asyncio.sleep(0)
        rest.append(asyncio.create_task(job("b", "b1")))
        await asyncio.gather(first, *rest)
        # b's one statement does not wait for every statement a sent before it
        assert order.index("b1") < order.index("a3"), order
    finally:
        pool.close()


# --- through the proxy ----------------------------------------------------------------------


def _config(pg: Any, server: str = "") -> Config:
    text = config_text(pg).replace("[server]\n", "[server]\n" + server, 1)
    return parse_config(text, "test.toml")


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = _config(pg)
    start_epoch(cfg, DASHBOARD)
    return cfg


#: The issue's statement: about 120 bytes, its expression spans four wide columns (4,923,072
#: values, under cell_limit): 30-80 s of work before the prediction refused it.
WIDE_EXPRESSION = (
    "SELECT count(*) FROM adult WHERE CASE WHEN age > 30 THEN hours_per_week "
    "ELSE education_num END + length(native_country) > 10"
)
WIDE_GROUPS = (
    "SELECT age, education, hours_per_week, native_country, count(*) FROM adult GROUP BY 1, 2, 3, 4"
)


def test_statements_predicted_above_the_limit_are_refused_at_once(config: Config) -> None:
    assert config.server.dp == WorkerLimits()  # on by default: 10 s, 1024 MB, 2 + 2 processes
    with Proxy(config, seed=31) as proxy, client(proxy) as (conn, notices):
        for sql, what in ((WIDE_EXPRESSION, "4,923,072 values"), (WIDE_GROUPS, "groups")):
            for prepare in (False, True):
                with pytest.raises(psycopg.errors.ProgramLimitExceeded) as info:
                    conn.execute(sql, prepare=prepare)
                diag = info.value.diag
                assert what in (diag.message_primary or "")
                assert "dp_statement_timeout = 10 s" in (diag.message_primary or "")
                assert "dp_statement_timeout" in (diag.message_hint or "")
        # nothing was spent, the session goes on, and a statement within the limit is answered
        assert not notices
        count = conn.execute(
            "SELECT count(*) FROM adult WHERE age * hours_per_week > 1000"
        ).fetchone()
        assert count is not None and isinstance(count[0], int)
        assert "spent" in notices[-1]


async def test_rows_made_past_the_limit_after_the_charge_say_the_answer_is_stored(
    config: Config,
) -> None:
    sql = "SELECT age, count(*) FROM adult WHERE sex = 'Female' GROUP BY age ORDER BY age"
    with Proxy(config, seed=32) as proxy:
        assert proxy.app is not None
        workers = proxy.app.router.workers
        conn = await asyncpg.connect(proxy.dsn)
        notices: list[str] = []
        conn.add_log_listener(lambda _c, m: notices.append(m.message))
        try:
            prepared = await conn.prepare(sql)  # classified (and its plan made) now
            limits = workers.quick.seconds, workers.heavy.seconds
            workers.quick.seconds = workers.heavy.seconds = 1e-9  # no piece of work fits
            try:
                with pytest.raises(asyncpg.exceptions.QueryCanceledError) as info:
                    await prepared.fetch()  # charged, answered, its 74 rows not made
            finally:
                workers.quick.seconds, workers.heavy.seconds = limits
            detail = info.value.detail or ""
            assert "the answer was charged" in detail and "is stored" in detail, detail
            assert "again" in (info.value.hint or "")
            assert not notices  # nothing was shown
            rows = await prepared.fetch()  # the stored answer, at no further cost
            assert [r[0] for r in rows] == list(range(17, 91))
            assert "repeat" in notices[-1] and "no budget spent" in notices[-1]
        finally:
            await conn.close()


# --- configuration --------------------------------------------------------------------------


def test_the_limits_are_configured_and_checked(
    pg: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(
        pg, "dp_workers = 3\ndp_statement_timeout = 2.5\ndp_statement_memory = 512\n"
    ).server.dp
    assert (cfg.workers, cfg.timeout, cfg.memory_mb) == (3, 2.5, 512)
    assert _config(pg, "dp_statement_timeout = 0\n").server.dp.units is None  # no limit
    for bad in (
        "dp_workers = 0",
        "dp_workers = 65",
        "dp_statement_timeout = -1",
        "dp_statement_timeout = 0.01",
        "dp_statement_memory = 100",
        'dp_statement_memory = "1G"',
    ):
        with pytest.raises(ConfigError) as info:
            _config(pg, bad + "\n")
        assert bad.split(" =")[0] in str(info.value)
    path = tmp_path / "lapras.toml"
    path.write_text(config_text(pg))
    assert cli.main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 quick + 2 heavy worker processes" in out and "10 s of CPU, 1024 MB" in out
