"""Read-only admin views over the wire: ``SHOW LAPRAS BUDGET | EPOCHS | RELEASES | POOLS``.

Answered by the proxy itself (never relayed), only to users declared ``admin = true`` in
``[[users]]``; anyone else gets 42501. One function per command, registered in
:data:`COMMANDS`. Everything shown is public bookkeeping (it depends on no data): budgets,
positions, charges, noise scales and standard errors, who did what and when. No exact value, no
histogram, and no answer value either (an admin view is not a way around the query path).

- ``SHOW LAPRAS BUDGET``: per protected table, its active epoch's budget (unit, total, spent,
  remaining, online releases of S, stream position, reserve, the spend as epsilon at the
  epoch's delta, the expected fresh answers E and the standard error of a count answered by
  the next fresh answer) and, for a table with a lifetime cap, its budget group's committed epsilon of
  the cap, as ``lapras budget``.
- ``SHOW LAPRAS EPOCHS``: every epoch, active and closed, with who started it and why.
- ``SHOW LAPRAS RELEASES``: the most recent releases of the active epochs, newest first: the
  Matrix Mechanism release, fresh online releases (with their charge) and answers served from
  stored releases (no charge); a charge whose release never followed (a crash between the two:
  budget lost, never overspent) shows as ``charged, not released``.
- ``SHOW LAPRAS POOLS``: the backend connection pools of the worker process serving the
  session (PgBouncer's ``SHOW POOLS``): per pool its user, database, backend role, mode,
  connections in use and idle, sessions waiting for one and the longest wait, and its size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from dp import engine
from dp.errors import LaprasError
from proxy.ledger import LedgerEntry
from proxy.wire.pool import PoolStats
from proxy.wire.router import Column
from proxy.wire.types import FLOAT8, INT8, TEXT

if TYPE_CHECKING:
    from proxy.epochs import EpochService

#: How many ledger rows per epoch SHOW LAPRAS RELEASES reads.
RECENT = 200


class UnknownAdminView(LaprasError):
    """42704 undefined_object: ``SHOW LAPRAS <name>`` with a name that is not a view."""

    sqlstate = "42704"


Row = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class AdminSources:
    """What the admin views read: the epochs' service (ledger, budgets) and this worker
    process's backend connection pools."""

    service: EpochService
    pools: Callable[[], Sequence[PoolStats]] = tuple


Runner = Callable[[AdminSources], Awaitable[list[Row]]]


@dataclass(frozen=True, slots=True)
class AdminCommand:
    name: str
    columns: tuple[Column, ...]
    run: Runner


_SHOW = re.compile(r"^\s*show\s+lapras\s+(\w+)\s*;?\s*$", re.IGNORECASE)


def _cols(*spec: tuple[str, int]) -> tuple[Column, ...]:
    return tuple(Column(name=n, type_oid=t) for n, t in spec)


async def _budget(src: AdminSources) -> list[Row]:
    service = src.service
    rows: list[Row] = []
    for table in sorted(service.schema.tables):
        cap = service.lifetime(table)
        life: Row = (None, None, None)
        if cap is not None:
            known = await service.ledger.lifetime(cap)
            life = (known.group, known.committed_epsilon, known.epsilon)
        st = await service.status(table)
        if st is None:
            rows.append((table, *(None,) * 12, *life, None, None))
            continue
        epoch, s = st
        rows.append(
            (
                table,
                epoch.id,
                epoch.view_name,
                s.unit,
                s.total,
                s.spent,
                max(s.total - s.spent, 0.0),
                s.online_releases,
                s.stream_length,
                s.position,
                s.reserve,
                epoch.started_at,
                s.spent_epsilon,
                *life,
                s.expected_fresh,
                s.next_std_error,
            )
        )
    return rows


async def _epochs(src: AdminSources) -> list[Row]:
    service = src.service
    return [
        (
            e.id,
            e.table_name,
            e.view_name,
            e.status,
            e.started_at,
            e.started_by,
            e.reason,
            e.closed_at,
        )
        for e in await service.ledger.epochs()
    ]


def _std(values: object) -> float | None:
    try:
        arr = [float(v) for v in values]  # type: ignore[attr-defined]
    except TypeError:
        return None
    return max(arr) if arr else None


def release_rows(table: str, epoch: int, unit: str, history: list[LedgerEntry]) -> list[Row]:
    """One row per release in ``history`` (any order), newest first (see the module doc)."""
    pending: dict[tuple[int, str], tuple[LedgerEntry, engine.Charged]] = {}
    out: list[tuple[int, Row]] = []

    def row(
        at: LedgerEntry,
        position: int,
        kind: str,
        charge: float,
        noise: str | None,
        se: float | None,
    ) -> None:
        out.append((at.seq, (table, epoch, at.seq, position, kind, charge, unit, noise, se, at.at)))

    for entry in sorted(history, key=lambda h: h.seq):
        ev = entry.event
        if isinstance(ev, engine.Charged):
            pending[(ev.position, ev.key)] = (entry, ev)
        elif isinstance(ev, engine.MatrixReleased):
            got = pending.pop((0, ""), None)
            rels = [b.release for b in ev.blocks] + ([ev.legacy] if ev.legacy else [])
            var = [float(v) for r in rels for v in r.noise_variance]
            se = math.sqrt(max(var)) if var else None
            charge = got[1].amount if got else 0.0
            row(entry, 0, "matrix release", charge, got[1].noise.value if got else None, se)
        elif isinstance(ev, engine.Released):
            got = pending.pop((ev.position, ev.key), None)
            charge = got[1].amount if got else 0.0
            row(
                entry,
                ev.position,
                "fresh",
                charge,
                got[1].noise.value if got else None,
                _std(ev.std_errors),
            )
        elif isinstance(ev, engine.Answered):
            kind = (
                "from matrix release"
                if ev.source is engine.Source.MATRIX
                else "from stored releases"
            )
            row(entry, ev.position, kind, 0.0, None, _std(ev.std_errors))
    for entry, c in pending.values():
        row(entry, c.position, "charged, not released", c.amount, c.noise.value, None)
    return [r for _, r in sorted(out, key=lambda x: x[0], reverse=True)]


async def _releases(src: AdminSources) -> list[Row]:
    service = src.service
    rows: list[Row] = []
    for table in sorted(service.schema.tables):
        st = await service.status(table)
        if st is None:
            continue
        epoch, s = st
        rows += release_rows(
            table, epoch.id, s.unit, await service.ledger.history(epoch.id, RECENT)
        )
    return rows


async def _pools(src: AdminSources) -> list[Row]:
    return [
        (p.user, p.database, p.backend_role, p.mode, p.active, p.idle, p.waiting, p.max_wait,
         p.pool_size)
        for p in sorted(src.pools(), key=lambda p: (p.user, p.database))
    ]  # fmt: skip


COMMANDS: Mapping[str, AdminCommand] = MappingProxyType(
    {
        "budget": AdminCommand(
            "budget",
            _cols(
                ("table", TEXT),
                ("epoch", INT8),
                ("view", TEXT),
                ("unit", TEXT),
                ("total", FLOAT8),
                ("spent", FLOAT8),
                ("remaining", FLOAT8),
                ("online_releases", INT8),
                ("stream_length", INT8),
                ("position", INT8),
                ("reserve", FLOAT8),
                ("started_at", TEXT),
                ("spent_epsilon", FLOAT8),
                ("budget_group", TEXT),
                ("lifetime_committed_epsilon", FLOAT8),
                ("lifetime_epsilon", FLOAT8),
                ("expected_fresh", INT8),
                ("next_std_error", FLOAT8),
            ),
            _budget,
        ),
        "epochs": AdminCommand(
            "epochs",
            _cols(
                ("epoch", INT8),
                ("table", TEXT),
                ("view", TEXT),
                ("status", TEXT),
                ("started_at", TEXT),
                ("started_by", TEXT),
                ("reason", TEXT),
                ("closed_at", TEXT),
            ),
            _epochs,
        ),
        "releases": AdminCommand(
            "releases",
            _cols(
                ("table", TEXT),
                ("epoch", INT8),
                ("seq", INT8),
                ("position", INT8),
                ("kind", TEXT),
                ("charge", FLOAT8),
                ("unit", TEXT),
                ("noise", TEXT),
                ("std_error", FLOAT8),
                ("at", TEXT),
            ),
            _releases,
        ),
        "pools": AdminCommand(
            "pools",
            _cols(
                ("user", TEXT),
                ("database", TEXT),
                ("backend_role", TEXT),
                ("pool_mode", TEXT),
                ("active", INT8),
                ("idle", INT8),
                ("waiting", INT8),
                ("max_wait", FLOAT8),
                ("pool_size", INT8),
            ),
            _pools,
        ),
    }
)


def parse(sql: str) -> AdminCommand | str | None:
    """The admin command ``sql`` names; its unknown name (a str) for ``SHOW LAPRAS <other>``;
    None when ``sql`` is not an admin statement at all."""
    m = _SHOW.match(sql)
    if m is None:
        return None
    name = m.group(1).lower()
    return COMMANDS.get(name, name)
