"""A privacy unit reached through a key (``privacy_unit = {column, table, key, unit}``), on
the embedded PostgreSQL: the neighbour test of docs/privacy.md §1a.

Fixture: the check-ins of 200 Gowalla users as accounts, and a mapping table that gives them
to 60 people at random -- most accounts to one person, some to two (shared), some to nobody,
some mapping rows twice, some with a NULL person, and accounts with no check-ins. The pin
(one statement, a fixed secret seed) is compared with the bounding recomputed by hand under
the join semantics: each (row, person) pair of the join is a row of that person. Then, for
several random people (always some with a shared account), the person is removed -- their
mapping rows, and the check-ins of accounts only they reach -- and the pin must change only in
that person's cells, by exactly that person's own bounded rows (so by at most the bound); the
same when only the mapping rows are removed.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from unit_helpers import GOWALLA, bounded, cell, counts, protect
from unit_helpers import config as make_config

import sql_fixtures.gowalla as gowalla
from proxy.app import admin_service

SEED = "0123456789abcdef0123456789abcdef"
ACCOUNTS = 200  # Gowalla users 0..199: their check-ins are the table
PEOPLE = 60
ROWS, PER_CELL = 50, 5
DECLARATION = (
    GOWALLA.replace("[tables.checkins", "[tables.nb_checkins")
    .replace(
        'privacy_unit = "user_id"',
        'privacy_unit = { column = "user_id", table = "public.nb_accounts", key = "id",'
        ' unit = "person" }',
    )
    .replace(
        f"max_rows_per_unit = {ROWS}",
        f"max_rows_per_unit = {ROWS}\nmax_rows_per_unit_per_cell = {PER_CELL}",
    )
)


def _mapping(rng: random.Random) -> list[tuple[int, int | None]]:
    """(account, person) rows: accounts 0..209 (200..209 have no check-ins)."""
    out: list[tuple[int, int | None]] = []
    for account in range(ACCOUNTS + 10):
        r = rng.random()
        if r < 0.08:
            continue  # nobody's: its check-ins count for no one
        people = rng.sample(range(PEOPLE), 2 if r > 0.85 else 1)  # 15 % shared
        out += [(account, p) for p in people]
        if rng.random() < 0.05:
            out.append((account, people[0]))  # the same mapping row twice
        if rng.random() < 0.03:
            out.append((account, None))
    return out


@pytest.fixture
def tables(pg: Any) -> Iterator[list[tuple[int, int | None]]]:
    protect(pg)
    mapping = _mapping(random.Random(41))
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.nb_checkins, public.nb_accounts")
        conn.execute(
            "CREATE TABLE public.nb_checkins AS SELECT * FROM public.checkins"
            f" WHERE user_id < {ACCOUNTS}"
        )
        conn.execute("CREATE TABLE public.nb_accounts (id integer, person integer)")
        with conn.cursor().copy("COPY public.nb_accounts FROM STDIN") as copy:
            for row in mapping:
                copy.write_row(row)
        for t in ("nb_checkins", "nb_accounts"):
            conn.execute(f"REVOKE ALL ON public.{t} FROM PUBLIC")
            conn.execute(f"GRANT SELECT ON public.{t} TO lapras_aggregator")
    yield mapping
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.nb_checkins, public.nb_accounts")


def _pin(pg: Any) -> Counter:
    async def go() -> Any:
        async with admin_service(make_config(pg, DECLARATION)) as service:
            return await service.pin("nb_checkins", None, seed=SEED)

    return counts(asyncio.run(go()))


def _by_person(mapping: list[tuple[int, int | None]], rows: list[gowalla.Row]) -> list[gowalla.Row]:
    """The join: every check-in once for each person its account maps to (distinct pairs)."""
    people: dict[int, set[int]] = defaultdict(set)
    for account, person in mapping:
        if person is not None:
            people[account].add(person)
    return [(p, *r[1:]) for r in rows for p in sorted(people[r[0]])]  # type: ignore[misc]


def test_removing_one_unit_changes_only_its_own_cells_by_its_bound(
    pg: Any, tables: list[tuple[int, int | None]]
) -> None:
    mapping = tables
    rows = [r for r in gowalla.rows() if r[0] < ACCOUNTS]
    joined = _by_person(mapping, rows)
    whole = _pin(pg)
    assert whole == bounded(joined, SEED, ROWS, PER_CELL)
    orphans = {a for a in range(ACCOUNTS)} - {a for a, p in mapping if p is not None}
    assert orphans and sum(whole.values()) < len(joined)  # the fixture has both cases

    owners: dict[int, set[int]] = defaultdict(set)
    for account, person in mapping:
        if person is not None:
            owners[account].add(person)
    shared = sorted({p for ps in owners.values() if len(ps) > 1 for p in ps})
    rng = random.Random(7)
    chosen = rng.sample(shared, 3) + rng.sample(sorted(set(range(PEOPLE)) - set(shared)), 1)
    for person, drop_rows in [(p, True) for p in chosen] + [(chosen[0], False)]:
        own = bounded([r for r in joined if r[0] == person], SEED, ROWS, PER_CELL)
        cells = {cell(r) for r in joined if r[0] == person}
        only = sorted(a for a, ps in owners.items() if ps == {person})
        with psycopg.connect(pg.admin_dsn) as conn:
            saved = conn.execute(
                "SELECT id, person FROM public.nb_accounts WHERE person = %s", (person,)
            ).fetchall()
            conn.execute("DELETE FROM public.nb_accounts WHERE person = %s", (person,))
            if drop_rows:
                conn.execute(
                    "CREATE TEMP TABLE gone ON COMMIT DROP AS SELECT * FROM public.nb_checkins"
                    " WHERE user_id = ANY(%s)",
                    (only,),
                )
                kept = conn.execute("SELECT * FROM gone").fetchall()
                conn.execute("DELETE FROM public.nb_checkins WHERE user_id = ANY(%s)", (only,))
            conn.commit()
        try:
            neighbour = _pin(pg)
        finally:
            with psycopg.connect(pg.admin_dsn) as conn:
                with conn.cursor().copy("COPY public.nb_accounts FROM STDIN") as copy:
                    for row in saved:
                        copy.write_row(row)
                if drop_rows:
                    with conn.cursor().copy("COPY public.nb_checkins FROM STDIN") as copy:
                        for row in kept:
                            copy.write_row(row)
                conn.commit()
        diff = whole.copy()
        diff.subtract(neighbour)
        diff = Counter({c: n for c, n in diff.items() if n})
        assert all(n > 0 for n in diff.values()), person  # only rows removed
        assert set(diff) <= cells  # only the person's own cells
        assert sum(diff.values()) <= ROWS and max(diff.values(), default=0) <= PER_CELL
        assert diff == own, person  # exactly the person's own bounded rows
    assert _pin(pg) == whole  # restored
