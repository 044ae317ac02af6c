"""An in-memory ledger with the interface and the semantics of :class:`proxy.ledger.PgLedger`.

For tests and for the ledger contract test (``tests/ledger/test_contract.py``), which runs the
same checks against both. It keeps what PostgreSQL keeps, in the same form: events are stored
as the JSON text of :func:`proxy.ledger.encode` and decoded on every read (so an event that does
not round-trip fails here exactly as it would in PostgreSQL), pins in their stored form
(``dp.pin.Pin.to_bytes``). Several :class:`MemLedger` handles may share one :class:`MemStore`, like several
proxy processes sharing one backend; :meth:`MemLedger.exclusive` then serialises them on the
epoch (an :class:`asyncio.Lock` per epoch, the analogue of the epoch's advisory lock).
:class:`MemWatch` is the analogue of :class:`proxy.epoch_watch.EpochWatch` on a store:
:meth:`MemLedger.close_epoch` tells every watch of the store, which drops the epoch at once,
before the close returns (so every holder always confirms).

Nothing here is durable: a process that dies loses it all. Never use it in production.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dp import engine_codec
from dp.domain import Domain
from dp.engine import EngineConfig
from dp.pin import Pin
from proxy.epoch_watch import CLOSE_WAIT, WatchUnavailableError
from proxy.ledger import (
    AdminEntry,
    ClosedEpoch,
    EpochLockedError,
    EpochRow,
    LedgerEntry,
    Lifetime,
    conflict_error,
    decode,
    encode,
    pin_from_bytes,
)


def _now() -> str:
    return str(datetime.now(UTC))


@dataclass(slots=True)
class _Epoch:
    row: EpochRow
    config: str
    histograms: dict[str, bytes]
    rows: list[tuple[int, str, str, str]]  # seq, kind, payload (JSON text), committed at
    public: dict[str, list[list[str | None]]] = field(default_factory=dict)
    group: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True)
class MemStore:
    """What a backend holds: shared by every :class:`MemLedger` handle made on it."""

    epochs: dict[int, _Epoch] = field(default_factory=dict)
    admin: list[AdminEntry] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 1
    watches: list[MemWatch] = field(default_factory=list)


class MemWatch:
    """The watch of one "proxy process" on a :class:`MemStore` (see the module doc).

    ``hold`` succeeds while the epoch is active; a close calls every subscriber's
    ``on_closed`` synchronously, then releases the epoch: a closed epoch is dropped from every
    epoch service of the store before :meth:`MemLedger.close_epoch` returns.
    """

    def __init__(self, store: MemStore) -> None:
        self.store = store
        self.held: set[int] = set()
        self._on_closed: list[Callable[[int], None]] = []
        self._on_lost: list[Callable[[], None]] = []

    def subscribe(self, on_closed: Callable[[int], None], on_lost: Callable[[], None]) -> None:
        self._on_closed.append(on_closed)
        self._on_lost.append(on_lost)

    async def start(self) -> None:
        if self not in self.store.watches:
            self.store.watches.append(self)

    async def close(self) -> None:
        if self in self.store.watches:
            self.store.watches.remove(self)
        self.held.clear()

    async def hold(self, epoch_id: int) -> bool:
        if self not in self.store.watches:
            raise WatchUnavailableError("the epoch watch is not running")
        e = self.store.epochs.get(epoch_id)
        if e is None or e.row.status != "active":
            return False
        self.held.add(epoch_id)
        return True

    async def release(self, epoch_id: int) -> None:
        self.held.discard(epoch_id)

    def lose(self) -> None:
        """The analogue of a lost watch session: every hold is gone, subscribers are told."""
        self.held.clear()
        for on_lost in self._on_lost:
            on_lost()

    def closed(self, epoch_id: int) -> bool:
        """Deliver a close; True when this watch was holding the epoch."""
        for on_closed in self._on_closed:
            on_closed(epoch_id)
        held = epoch_id in self.held
        self.held.discard(epoch_id)
        return held


@dataclass(slots=True)
class _MemTransaction:
    epoch: _Epoch
    epoch_id: int
    seq: int
    new_events: list[tuple[int, object]]

    async def append(self, events: Sequence[object], *, durable: bool = True) -> None:
        """Append ``events`` atomically (all encoded first); ``durable`` is meaningless here."""
        if not events:
            return
        encoded = [encode(ev) for ev in events]
        if self.epoch.rows and self.epoch.rows[-1][0] != self.seq:
            raise RuntimeError("the ledger was appended to outside the exclusive section")
        at = _now()
        for kind, payload in encoded:
            self.seq += 1
            self.epoch.rows.append((self.seq, kind, payload, at))
        await asyncio.sleep(0)  # a commit is a suspension point, as in PostgreSQL


class MemLedger:
    """A ledger in memory (see the module doc). ``MemLedger(store)`` shares ``store``."""

    def __init__(self, store: MemStore | None = None) -> None:
        self.store = store if store is not None else MemStore()

    async def close(self) -> None:
        return None

    def _active(self, table: str) -> _Epoch | None:
        return next(
            (
                e
                for e in self.store.epochs.values()
                if e.row.table_name == table and e.row.status == "active"
            ),
            None,
        )

    async def create_epoch(
        self,
        *,
        table: str,
        view: str,
        config: EngineConfig,
        pin: Pin,
        events: Sequence[object],
        actor: str,
        reason: str,
        lifetime: Lifetime | None = None,
        group: str | None = None,
    ) -> int:
        config_json = json.dumps(engine_codec.encode_config(config), allow_nan=False)
        encoded = [encode(ev) for ev in events]  # fail before anything is written
        cells = pin.to_bytes()
        if lifetime is not None:  # no await between the check and the insert: atomic here
            known = self._committed(lifetime)
            if not known.admits(config):
                raise known.refusal(config)
            group = lifetime.group
        if self._active(table) is not None:
            raise conflict_error(table)
        epoch_id = self.store.next_id
        self.store.next_id += 1
        at = _now()
        row = EpochRow(
            id=epoch_id,
            table_name=table,
            view_name=view,
            status="active",
            started_by=actor,
            reason=reason,
            started_at=at,
            closed_at=None,
        )
        rows = [(i, kind, payload, at) for i, (kind, payload) in enumerate(encoded, start=1)]
        self.store.epochs[epoch_id] = _Epoch(
            row=row,
            config=config_json,
            histograms={view: cells},
            rows=rows,
            group=group or table,
        )
        self.store.admin.append(
            AdminEntry(
                at=at,
                actor=actor,
                action="epoch start",
                details={"epoch": epoch_id, "table": table, "view": view, "reason": reason},
            )
        )
        return epoch_id

    async def lifetime(self, cap: Lifetime) -> Lifetime:
        return self._committed(cap)

    def _committed(self, cap: Lifetime) -> Lifetime:
        mine = [
            json.loads(e.config)
            for e in self.store.epochs.values()
            if e.group == cap.group or e.row.table_name in cap.tables
        ]
        return dataclasses.replace(
            cap,
            committed_epsilon=math.fsum(float(c["epsilon"]) for c in mine),
            committed_delta=math.fsum(float(c["delta"]) for c in mine),
            epochs=len(mine),
        )

    async def active_epoch(self, table: str) -> EpochRow | None:
        e = self._active(table)
        return None if e is None else e.row

    async def epochs(self, table: str | None = None) -> list[EpochRow]:
        return [
            e.row
            for _, e in sorted(self.store.epochs.items())
            if table is None or e.row.table_name == table
        ]

    async def close_epoch(
        self, table: str, *, actor: str, reason: str, wait: float = CLOSE_WAIT
    ) -> ClosedEpoch | None:
        """Close the table's active epoch; every watch of the store drops it before this
        returns (``wait`` is meaningless here: nobody can fail to confirm)."""
        e = self._active(table)
        if e is None:
            return None
        async with e.lock:  # wait for an answer in flight, as the advisory lock does
            if e.row.status != "active":
                return None
            at = _now()
            e.row = EpochRow(
                id=e.row.id,
                table_name=e.row.table_name,
                view_name=e.row.view_name,
                status="closed",
                started_by=e.row.started_by,
                reason=e.row.reason,
                started_at=e.row.started_at,
                closed_at=at,
            )
            self.store.admin.append(
                AdminEntry(
                    at=at,
                    actor=actor,
                    action="epoch close",
                    details={"epoch": e.row.id, "table": table, "reason": reason},
                )
            )
            serving = sum(w.closed(e.row.id) for w in list(self.store.watches))
            return ClosedEpoch.of(e.row, serving=serving, unconfirmed=0)

    def watch(self) -> MemWatch:
        """A new, unstarted watch on this ledger's store."""
        return MemWatch(self.store)

    async def pinned(self, epoch_id: int, view: str, domain: Domain) -> Pin:
        e = self.store.epochs.get(epoch_id)
        if e is None or view not in e.histograms:
            raise LookupError("the epoch has no pinned histogram")
        return pin_from_bytes(domain, e.histograms[view])

    async def public_rows(self, epoch_id: int, name: str) -> list[list[str | None]] | None:
        e = self.store.epochs.get(epoch_id)
        return None if e is None or name not in e.public else list(e.public[name])

    async def keep_public_rows(
        self, epoch_id: int, name: str, rows: list[list[str | None]]
    ) -> list[list[str | None]]:
        e = self.store.epochs[epoch_id]
        return list(e.public.setdefault(name, [list(r) for r in rows]))

    async def events(self, epoch_id: int, after: int = 0) -> list[tuple[int, object]]:
        e = self.store.epochs.get(epoch_id)
        if e is None:
            return []
        return [(seq, decode(payload)) for seq, _, payload, _ in e.rows if seq > after]

    @asynccontextmanager
    async def exclusive(self, epoch_id: int, after: int) -> AsyncIterator[_MemTransaction]:
        """Hold the epoch exclusively; yield the events appended since ``after`` and an appender."""
        e = self.store.epochs.get(epoch_id)
        if e is None:
            raise EpochLockedError("the epoch was closed")
        async with e.lock:
            if e.row.status != "active":
                raise EpochLockedError("the epoch was closed")
            new = await self.events(epoch_id, after)
            yield _MemTransaction(e, epoch_id, new[-1][0] if new else after, new)

    async def log_queries(self, records: Sequence[dict[str, Any]]) -> None:
        for record in records:
            bindings = json.loads(json.dumps(record["bindings"], default=str))
            self.store.queries.append({**record, "bindings": bindings, "logged_at": _now()})

    async def prune_log(self, *, max_days: float, max_rows: int) -> int:
        before = len(self.store.queries)
        horizon = datetime.now(UTC).timestamp() - max_days * 86400.0
        kept = [
            q for q in self.store.queries
            if datetime.fromisoformat(q["logged_at"]).timestamp() >= horizon
        ]  # fmt: skip
        self.store.queries[:] = kept[-max_rows:] if max_rows > 0 else []
        return before - len(self.store.queries)

    async def history(self, epoch_id: int, limit: int) -> list[LedgerEntry]:
        e = self.store.epochs.get(epoch_id)
        if e is None:
            return []
        return [
            LedgerEntry(seq=seq, kind=kind, at=at, event=decode(payload))
            for seq, kind, payload, at in reversed(e.rows[-limit:] if limit > 0 else [])
        ]

    async def admin_log(self, limit: int) -> list[AdminEntry]:
        return list(reversed(self.store.admin[-limit:] if limit > 0 else []))
