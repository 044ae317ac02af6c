"""User-level privacy and lifetime budgets through the real parts: the Gowalla check-ins
(sql_fixtures/gowalla: 1,000 users, 15 to 1,624 check-ins each) declared with
``privacy_unit = "user_id"`` and ``max_rows_per_unit = 50``, on the embedded PostgreSQL.

Checked: the pin keeps exactly the rows a hand-computed bounding keeps (each user's cells in
the order of the keyed hash, at most 50 rows, at most ``per_cell`` in one cell); through the
wire, with the noise off, a count is the bounded count (a user with more rows than the bound
counts exactly the bound), and with the noise on its standard error is the bound times that of
the same table declared row-level; the lifetime cap of a budget group refuses an epoch past it,
also when two admins start epochs in the group at once; a view of a protected table is refused
unless it spends its base table's budget.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, client, reset_ledger, start_epoch
from unit_helpers import BOUND, GOWALLA, ROW_LEVEL, close, protect, start
from unit_helpers import bounded as _bounded
from unit_helpers import config as make_config
from unit_helpers import counts as _counts

import sql_fixtures.gowalla as gowalla
from dp.errors import BudgetExhaustedError
from proxy.app import admin_service
from proxy.config import Config
from proxy.epochs import BaseTableBudgetError
from proxy.ledger import LifetimeBudgetExhaustedError, decode

SEED = "f00dfeedcafebeef0123456789abcdef"


@pytest.fixture(autouse=True)
def _protected(pg: Any) -> None:
    protect(pg)


def _pin(config: Config) -> Any:
    async def go() -> Any:
        async with admin_service(config) as service:
            return await service.pin("checkins", None, seed=SEED)

    return asyncio.run(go())


@pytest.mark.parametrize("per_cell", [None, 3])
def test_the_pin_bounds_each_user_as_recomputed_by_hand(pg: Any, per_cell: int | None) -> None:
    text = GOWALLA
    if per_cell is not None:
        text = text.replace(
            "max_rows_per_unit = 50",
            f"max_rows_per_unit = 50\nmax_rows_per_unit_per_cell = {per_cell}",
        )
    pin = _pin(make_config(pg, text))
    want = _bounded(gowalla.rows(), SEED, BOUND, per_cell or BOUND)
    assert _counts(pin) == want
    users = Counter(r[0] for r in gowalla.rows())
    assert max(users.values()) > BOUND  # the data has users above the bound
    if per_cell is None:  # every user counts min(their rows, the bound)
        assert sum(want.values()) == sum(min(n, BOUND) for n in users.values())


def test_a_unit_reached_through_a_key_to_another_table(pg: Any) -> None:
    """privacy_unit = {column, table, key, unit}: every four Gowalla users are one person's
    accounts; the person is the unit, bounded to 50 rows over all of their accounts."""
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.accounts")
        conn.execute("CREATE TABLE public.accounts (id integer PRIMARY KEY, person integer)")
        conn.execute("INSERT INTO public.accounts SELECT i, i / 4 FROM generate_series(0, 999) i")
        conn.execute("GRANT SELECT ON public.accounts TO lapras_aggregator")
    try:
        text = GOWALLA.replace(
            'privacy_unit = "user_id"',
            'privacy_unit = { column = "user_id", table = "public.accounts", key = "id",'
            ' unit = "person" }',
        )
        pin = _pin(make_config(pg, text))
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE public.accounts")
    people = [(r[0] // 4, *r[1:]) for r in gowalla.rows()]
    want = _bounded(people, SEED, BOUND, BOUND)  # type: ignore[arg-type]
    assert _counts(pin) == want
    per_person = Counter(p[0] for p in people)
    assert sum(want.values()) == sum(min(n, BOUND) for n in per_person.values())


def test_through_the_wire_a_count_is_the_bounded_count_and_its_noise_follows_the_bound(
    pg: Any,
) -> None:
    users = Counter(r[0] for r in gowalla.rows())
    bounded_total = sum(min(n, BOUND) for n in users.values())
    sql = "SELECT hour, count(*) FROM checkins GROUP BY hour ORDER BY hour"

    reset_ledger(pg)
    config = make_config(pg)
    start_epoch(config, [], table="checkins")
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, _):
        [(total,)] = conn.execute("SELECT count(*) FROM checkins").fetchall()
        assert total == bounded_total < gowalla.ROWS  # each user counts at most 50 rows
        by_hour = conn.execute(sql).fetchall()
        assert [h for h, _ in by_hour] == list(range(24))
        assert sum(n for _, n in by_hour) == bounded_total

    def first_answer(declaration: str) -> tuple[float, Any]:
        reset_ledger(pg)
        cfg = make_config(pg, declaration)
        start_epoch(cfg, [], table="checkins")
        with Proxy(cfg, seed=3) as proxy, client(proxy) as (conn, notices):
            conn.execute(sql).fetchall()
            [se] = re.findall(r"standard error count ([0-9.e+]+?)\.?$", notices[-1])
        with psycopg.connect(pg.state_dsn) as st:
            [(payload,)] = st.execute(
                "SELECT payload::text FROM lapras.ledger WHERE kind = 'Charged'"
            ).fetchall()
        return float(se), decode(payload)

    # the first fresh answer of an epoch is charged the same in both: only the sensitivity
    # differs, 50 (a user's 50 rows in one hour) against 1
    unit_se, unit_charge = first_answer(GOWALLA)
    row_se, row_charge = first_answer(ROW_LEVEL)
    assert (unit_charge.sensitivity, row_charge.sensitivity) == (BOUND, 1.0)
    assert unit_charge.amount == row_charge.amount
    assert unit_charge.scale / row_charge.scale == pytest.approx(BOUND, rel=1e-12)
    assert unit_se / row_se == pytest.approx(BOUND, rel=1e-3)  # the NOTICE has 4 digits


def test_the_lifetime_budget_refuses_an_epoch_past_its_cap(pg: Any) -> None:
    reset_ledger(pg)
    config = make_config(pg)  # lifetime_epsilon = 4, lifetime_delta = 1e-4
    asyncio.run(start(config, "checkins", 3.0))
    asyncio.run(close(config, "checkins"))
    with pytest.raises(LifetimeBudgetExhaustedError) as info:
        asyncio.run(start(config, "checkins", 1.5))
    assert isinstance(info.value, BudgetExhaustedError) and info.value.sqlstate == "42Q01"
    assert "lifetime budget of checkins" in info.value.message
    assert "committed epsilon 3" in info.value.message
    asyncio.run(start(config, "checkins", 1.0))  # exactly the cap: admitted

    async def committed() -> tuple[float, int]:
        async with admin_service(config) as service:
            cap = service.lifetime("checkins")
            assert cap is not None
            known = await service.ledger.lifetime(cap)
            return known.committed_epsilon, known.epochs

    assert asyncio.run(committed()) == (4.0, 2)


VIEW = "CREATE VIEW public.checkins_2010 AS SELECT * FROM public.checkins WHERE checkin_date >= '2010-01-01'"


def _with_view(group: str | None) -> str:
    decl = GOWALLA.replace("[tables.checkins", "[tables.checkins_2010")
    if group is not None:
        decl = decl.replace('schema = "public"', f'schema = "public"\nbudget_group = "{group}"', 1)
    return GOWALLA + "\n" + decl


@pytest.fixture
def view(pg: Any) -> Any:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP VIEW IF EXISTS public.checkins_2010")
        conn.execute(VIEW)
        conn.execute("GRANT SELECT ON public.checkins_2010 TO lapras_aggregator")
        conn.execute("REVOKE ALL ON public.checkins_2010 FROM PUBLIC")
    yield
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP VIEW IF EXISTS public.checkins_2010")


def test_a_view_of_a_protected_table_must_spend_its_budget(pg: Any, view: Any) -> None:
    reset_ledger(pg)
    with pytest.raises(BaseTableBudgetError) as info:
        asyncio.run(start(make_config(pg, _with_view(None)), "checkins_2010", 1.0))
    assert info.value.sqlstate == "55000"
    assert 'budget_group = "checkins"' in (info.value.hint or "")
    asyncio.run(start(make_config(pg, _with_view("checkins")), "checkins_2010", 1.0))


def test_two_admins_at_once_never_take_a_group_past_its_cap(pg: Any, view: Any) -> None:
    """Two epochs of 3 in a group capped at 4, started at once by two services (two ledger
    connections): exactly one is admitted, whichever it is."""
    reset_ledger(pg)
    config = make_config(pg, _with_view("checkins"))

    async def both() -> list[Any]:
        return await asyncio.gather(
            start(config, "checkins", 3.0),
            start(config, "checkins_2010", 3.0),
            return_exceptions=True,
        )

    results = asyncio.run(both())
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], LifetimeBudgetExhaustedError), results
