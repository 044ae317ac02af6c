"""Epochs at run time: start, close, and answer DP statements with the LAPRAS engine.

An *epoch* covers one protected table: its domain is the product of every declared attribute
(or, when an administrator restricts it, of one declared view's), never materialised. Its data
is pinned once, sparse (:mod:`dp.pin`: one ordinary ``GROUP BY`` statement on the backend),
and every statement's batch is over the marginal of the columns it uses, answered from that
marginal of the pin. Only an epoch restricted to a view refuses a statement using a column
outside it (with a hint).

The flow of one answer (ARCHITECTURE.md §3 steps 4-6):

1. an exact repeat is served from the in-memory state: no ledger access at all;
2. otherwise the statement joins the epoch's queue, and is answered by the next *group*
   (group commit): while one group is written, the statements that arrive queue up, and the
   next group takes all of them at once. Holding the epoch exclusively for the whole group
   (:meth:`proxy.ledger.PgLedger.exclusive`: one advisory lock, one fold of the events other
   proxies appended), each statement is decided in turn against the state after the previous
   ones' events. Those answered from stored releases (MATRIX, STORED) are decided first; their
   ``Answered`` events are committed together, asynchronously (they spend nothing), and they
   are answered at once. Then the others: their events -- the charges -- are committed in one
   transaction, synchronously when there is a charge, *before* any noise is drawn; then each
   fresh statement's noise is drawn (``release``), all their ``Released`` events are committed
   in one more synchronous transaction (stored, so a repeat never draws new noise), and only
   then are their answers sent. A refusal (a budget limit) refuses its statement only.

Crash safety follows the ledger's order: a crash before the charges' commit loses nothing
(no noise was drawn); after it and before the releases' commit, the group's charges are spent
and never released (budget lost, nothing shown: no client was answered); after it, everything
was committed before any fresh answer was sent. An asynchronous commit lost in a crash of the
state database loses only ``Answered`` events of answers from stored releases (a repeat
recomputes them from the same releases; nothing is spent). Which statements share a group
depends only on when they arrive and on how long the group before took, as the order of the
lock did before; every decision still depends only on public values.

Every check that can fail (no epoch, attributes outside a restricted epoch, budget refusals)
happens before the data is touched. A marginal is computed from the pin the first time it is
asked, then cached.

A proxy process loads every active epoch before it accepts connections (:meth:`EpochService.warm`:
the ledger's replay and the pin's parse run in worker threads), and the engine's work for each
answer runs in a worker thread too, so no session waits on another's mathematics.

A closed epoch stops being answered at once, repeats included (:mod:`proxy.epoch_watch`): with
a watch, an epoch is loaded into memory only under its shared watch lock and after re-reading
that it is active, and it is dropped from memory -- before that lock is released -- as soon as
the watch is told of its close, or of the loss of the watch session. A statement that finds its
epoch dropped reloads it from the ledger: it is answered in the table's new epoch, or refused
with 55000 when there is none. Without a watch (the short-lived admin commands), a closed
epoch is noticed at the next charge or reload only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

import rewriter
from dp import engine
from dp.accuracy import AccuracyUnavailableError
from dp.domain import Domain, QueryBatch
from dp.errors import BudgetExhaustedError, LaprasError
from dp.noise import Sampler
from dp.per_unit import UnitsDomain, within
from dp.pin import Pin
from proxy import lineage, public_relations
from proxy.epoch_watch import CLOSE_WAIT, Watch, WatchUnavailableError
from proxy.ledger import (
    ClosedEpoch,
    EpochLockedError,
    EpochRow,
    Ledger,
    Lifetime,
    conflict_error,
)

log = logging.getLogger("lapras.epochs")

#: Loads of one table's epoch in a row that may be undone by a close or a lost watch session.
_LOAD_ATTEMPTS = 3


class NoActiveEpochError(LaprasError):
    """55000 object_not_in_prerequisite_state: no epoch is running for the table."""

    sqlstate = "55000"


class BaseTableBudgetError(LaprasError):
    """55000 object_not_in_prerequisite_state: the table is a view of a protected table
    that spends another budget."""

    sqlstate = "55000"


class OutsideEpochViewError(LaprasError):
    """0A000: the statement uses attributes the epoch's view does not cover."""

    sqlstate = "0A000"


#: The ``view_name`` of an epoch over the whole table (not restricted to a declared view).
WHOLE_TABLE = "*"


def coverage(view_name: str) -> str:
    """What an epoch covers, in words: ``whole table`` or ``view NAME``."""
    return "whole table" if view_name == WHOLE_TABLE else f"view {view_name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What a client is told: answers, standard errors, how it was answered, what it cost."""

    answers: tuple[float, ...]
    std_errors: tuple[float, ...]
    kind: engine.DecisionKind
    charge: float
    status: engine.BudgetStatus


class _Reload(Exception):
    """The handle was dropped while the statement waited for its group: reload, retry."""


@dataclass(slots=True)
class _Waiting:
    """A statement waiting for its group: its batch, the standard error it asks for (None:
    none), and where its outcome goes."""

    batch: QueryBatch
    outcome: asyncio.Future[Answer]
    max_error: float | None = None


@dataclass(slots=True)
class EpochHandle:
    """One active epoch in this process: its pinned data and its folded state.

    ``queue``: the statements waiting for the next group; ``writer``: the task writing the
    groups of this epoch, one at a time (it alone changes ``state`` and uses the pin, between
    its suspension points), while there are statements queued.
    """

    row: EpochRow
    domain: Domain
    pin: Pin
    state: engine.EngineState
    seq: int
    queue: list[_Waiting] = dataclasses.field(default_factory=list)
    writer: asyncio.Task[None] | None = None
    #: Set when the handle is dropped (its epoch closed, or the watch session lost): a
    #: statement still queued must not be answered from it, and reloads.
    dropped: bool = False
    #: The rows of the public tables its statements joined (proxy.public_relations).
    public: dict[str, Any] = dataclasses.field(default_factory=dict)
    _status: tuple[engine.EngineState, engine.BudgetStatus] | None = None

    def status(self) -> engine.BudgetStatus:
        """The budget status of the current state (computed once per state: repeats, the
        most common answers, leave the state as it is)."""
        if self._status is None or self._status[0] is not self.state:
            self._status = (self.state, engine.status(self.state))
        return self._status[1]


class EpochService:
    """Starts, closes and answers through epochs; shared by every session of a proxy.

    ``watch`` (a proxy process has one, started; see :mod:`proxy.epoch_watch`): when a close of
    an epoch is confirmed by this process, no statement is answered from that epoch here any
    more, repeats included.
    """

    def __init__(
        self,
        *,
        schema: rewriter.Schema,
        ledger: Ledger,
        aggregator_dsn: str,
        sampler: Callable[[], Sampler],
        watch: Watch | None = None,
        public_dsn: str | None = None,
    ) -> None:
        """``public_dsn``: the role that reads declared public tables (the passthrough role's
        DSN; the aggregator's when not given: proxy.public_relations)."""
        self.schema = schema
        self.ledger = ledger
        self.aggregator_dsn = aggregator_dsn
        self.public_dsn = public_dsn or aggregator_dsn
        self._sampler = sampler
        self._handles: dict[str, EpochHandle] = {}
        self._watch = watch
        #: Epochs this process was told were closed (an id is never reused nor reopened), and
        #: the tables whose epoch it dropped for a close (until one loads again).
        self._closed_ids: set[int] = set()
        self._closed_tables: set[str] = set()
        #: Bumped when the watch session is lost: a load begun before is discarded.
        self._generation = 0
        if watch is not None:
            watch.subscribe(self._epoch_closed, self._watch_lost)
        self._loading = asyncio.Lock()

    # -- admin ---------------------------------------------------------------------------------

    def table(self, name: str) -> Any:
        decl = self.schema.tables.get(name.split(".")[-1].lower())
        if decl is None:
            raise NoActiveEpochError(
                f"table {name} is not a protected table of this proxy",
                hint=f"protected tables: {', '.join(sorted(self.schema.tables))}",
            )
        return decl

    def attributes(self, table: str, view: str | None) -> tuple[str, ...] | None:
        """The attributes an epoch covers: None for the whole table, else the view's."""
        decl = self.table(table)
        if view is None or view == WHOLE_TABLE:
            return None
        views = {v.name: v for v in decl.views}
        if view not in views:
            raise NoActiveEpochError(
                f"table {decl.name} has no view {view}",
                hint=f"views: {', '.join(views) or 'none'}; without a view an epoch covers "
                "the whole table",
            )
        names: tuple[str, ...] = views[view].names
        return names

    async def pin(
        self, table: str, attributes: Sequence[str] | None, *, seed: str | None = None
    ) -> Pin:
        """Pin the table's data: one statement on the backend (the aggregator role), read
        with a binary COPY (fixed-width tuples, parsed in one pass). A table with a privacy
        unit is pinned with each unit's rows bounded, by a fresh secret seed (never stored:
        the pin is; ``seed`` is for tests that recompute the bounding by hand)."""
        decl = self.table(table)
        domain = rewriter.pin_domain(self.schema, decl.name, attributes)
        seed = secrets.token_hex(16) if seed is None else seed
        sql = rewriter.pin_sql(self.schema, decl.name, attributes, seed=seed)
        buf = bytearray()
        async with await psycopg.AsyncConnection.connect(self.aggregator_dsn) as conn:
            cur = conn.cursor()
            async with cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)") as copy:
                async for data in copy:
                    buf += data
        pin = await asyncio.to_thread(rewriter.pin_from_copy, domain, buf)
        del buf
        return pin

    def predicted_batches(
        self,
        table: str,
        domain: Domain,
        statements: Sequence[str],
        probabilities: Sequence[float] | None = None,
    ) -> tuple[tuple[QueryBatch, ...], tuple[float, ...]]:
        """The predicted set P from SQL statements: one batch each, over its marginal; and
        the probability of each (its statement's, 1 when none is given)."""
        decl = self.table(table)
        if probabilities is not None and len(probabilities) != len(statements):
            raise ValueError("one probability per predicted statement")
        batches = []
        weights = []
        for i, sql in enumerate(statements):
            for st in rewriter.classify(sql, self.schema):
                if (
                    isinstance(st, rewriter.DPStatement)
                    and st.plan is not None
                    and st.plan.table.split(".")[-1] == decl.name
                ):
                    if domain.covers(st.plan.batch.domain):
                        batches.append(st.plan.batch)
                        weights.append(1.0 if probabilities is None else probabilities[i])
                    elif st.plan.batch.domain.derived:
                        continue  # a question about units: answered online, never in P
                    else:
                        log.warning(
                            "a predicted statement is outside the epoch's view and was skipped"
                        )
        return tuple(batches), tuple(weights)

    async def start_epoch(
        self,
        *,
        table: str,
        view: str | None = None,
        config: engine.EngineConfig,
        predicted: Sequence[str] = (),
        probabilities: Sequence[float] | None = None,
        actor: str,
        reason: str = "",
    ) -> int:
        """Start an epoch over the whole table (or one declared view): pin the data, release
        P through the Matrix Mechanism (in the default mode, its statements weighted by their
        ``probabilities`` when given: ``dp.engine.start``), persist. The epoch's neighbours
        are the table's (its privacy unit's bound replaces whatever ``config`` says); it is
        refused when it would take the table's budget group past its lifetime cap (checked
        first here, and again atomically when the epoch is created), or when the table is a
        view of a protected table of another budget group."""
        decl = self.table(table)
        attributes = self.attributes(decl.name, view)
        config = dataclasses.replace(config, contribution=decl.contribution)
        if await self.ledger.active_epoch(decl.name) is not None:
            raise conflict_error(decl.name)
        lifetime = self.lifetime(decl.name)
        if lifetime is not None:
            known = await self.ledger.lifetime(lifetime)
            if not known.admits(config):
                raise known.refusal(config)
        await self._check_bases(decl)
        domain = rewriter.pin_domain(self.schema, decl.name, attributes)
        batches, weights = self.predicted_batches(decl.name, domain, predicted, probabilities)
        pin = await self.pin(decl.name, attributes)
        _, events = await asyncio.to_thread(
            functools.partial(engine.start, weights=weights),
            config,
            domain,
            batches,
            pin,
            self._sampler(),
        )
        return await self.ledger.create_epoch(
            table=decl.name,
            view=WHOLE_TABLE if attributes is None else str(view),
            config=config,
            pin=pin,
            events=events,
            actor=actor,
            reason=reason,
            lifetime=lifetime,
            group=decl.group,
        )

    def lifetime(self, table: str) -> Lifetime | None:
        """The lifetime cap of ``table``'s budget group (None: uncapped)."""
        decl = self.table(table)
        cap = self.schema.lifetimes.get(decl.group)
        if cap is None:
            return None
        tables = tuple(sorted(t.name for t in self.schema.tables.values() if t.group == decl.group))
        return Lifetime(group=decl.group, tables=tables, epsilon=cap.epsilon, delta=cap.delta)

    async def _check_bases(self, decl: Any) -> None:
        """Refuse an epoch on a relation that reads a protected table of another budget
        group: it would spend a second budget on the same people. What it reads comes from
        the backend's own catalogue (:mod:`proxy.lineage`: views' rules, the functions they
        call, child tables), not from any text of ours; a unit reached through a key reads
        its mapping table too, which is checked alike (a protected mapping table, or one that
        reads a protected table, must be of the same group)."""
        async with await psycopg.AsyncConnection.connect(self.aggregator_dsn) as conn:
            known = await lineage.aload(conn)
        reading = [f"{decl.schema}.{decl.name}"]
        if decl.unit is not None and decl.unit.table is not None:
            reading.append(decl.unit.table)
        for i, relation in enumerate(reading):
            rel = known.find(relation)
            if rel is None:
                continue  # the pin's own statement says so, in PostgreSQL's words
            for oid in sorted(known.reads(rel.oid)):
                r = known.relations[oid]
                base = self.schema.protected(r.name, r.schema)
                if base is None or base.name == decl.name or base.group == decl.group:
                    continue
                if i == 0:
                    subject = f"table {decl.name} reads"
                elif oid == rel.oid:
                    subject = f"table {decl.name} reaches its privacy unit through"
                else:
                    subject = (
                        f"table {decl.name} reaches its privacy unit through {rel.qualified},"
                        " which reads"
                    )
                raise BaseTableBudgetError(
                    f"{subject} protected table {base.name}, which spends the budget of "
                    f"{base.group}",
                    hint=f'declare budget_group = "{base.group}" for {decl.name} (a protected '
                    "relation that reads another shares its budget), or protect only one of "
                    "them",
                )

    async def close_epoch(
        self, table: str, *, actor: str, reason: str = "", wait: float = CLOSE_WAIT
    ) -> ClosedEpoch | None:
        """Close the table's epoch and wait (at most ``wait`` s) for the proxy processes
        serving it to drop it (:meth:`proxy.ledger.PgLedger.close_epoch`)."""
        decl = self.table(table)
        row = await self.ledger.close_epoch(decl.name, actor=actor, reason=reason, wait=wait)
        if row is not None:
            self._epoch_closed(row.id)
            if self._watch is not None:
                await self._watch.release(row.id)
        await self._release(self._drop(decl.name))
        return row

    async def warm(self) -> int:
        """Load every protected table's active epoch (replay its ledger, read its pin) before
        the proxy accepts traffic, so the first DP statement does not pay for it; returns how
        many were loaded. A table whose epoch cannot be loaded now is loaded by its first
        statement, as without warming."""
        await asyncio.to_thread(self._sampler)  # the first one loads its library (~0.15 s)
        loaded = 0
        for table in self.schema.tables:
            try:
                loaded += await self._handle(table) is not None
            except (LaprasError, OSError, psycopg.Error) as exc:
                log.warning("the epoch of table %s was not loaded at start: %s", table, exc)
        return loaded

    def loaded(self, table: str) -> EpochRow | None:
        """The epoch of ``table`` this process holds in memory, if any."""
        handle = self._handles.get(table)
        return None if handle is None else handle.row

    async def status(self, table: str) -> tuple[EpochRow, engine.BudgetStatus] | None:
        handle = await self._handle(self.table(table).name, refresh=True)
        if handle is None:
            return None
        return handle.row, handle.status()

    # -- answering -----------------------------------------------------------------------------

    def _epoch_closed(self, epoch_id: int) -> None:
        """The watch's news of a close: the epoch is dropped at once (the watch releases its
        lock after this returns). Synchronous, so no statement runs in between."""
        self._closed_ids.add(epoch_id)
        for table, handle in list(self._handles.items()):
            if handle.row.id == epoch_id:
                self._drop(table, handle)
                self._closed_tables.add(table)

    def _watch_lost(self) -> None:
        """The watch session ended, and its locks with it: every epoch is dropped at once (a
        close would no longer wait for this process); statements reload them."""
        self._generation += 1
        for table in list(self._handles):
            self._drop(table)

    def _drop(self, table: str, handle: EpochHandle | None = None) -> EpochHandle | None:
        """Forget the table's epoch (only if it is ``handle``, when given); return it."""
        current = self._handles.get(table)
        if current is None or (handle is not None and current is not handle):
            return None
        del self._handles[table]
        current.dropped = True
        return current

    async def _release(self, handle: EpochHandle | None) -> None:
        """Release a dropped handle's watch lock, unless its epoch is loaded again."""
        if handle is None or self._watch is None:
            return
        if all(h.row.id != handle.row.id for h in self._handles.values()):
            await self._watch.release(handle.row.id)

    async def _handle(self, table: str, *, refresh: bool = False) -> EpochHandle | None:
        handle = self._handles.get(table)
        if handle is not None and not refresh:
            return handle
        async with self._loading:
            generation = self._generation
            for _attempt in range(_LOAD_ATTEMPTS):
                row = await self.ledger.active_epoch(table)
                handle = self._handles.get(table)
                if handle is not None and row is not None and handle.row.id == row.id:
                    return handle
                await self._release(self._drop(table))  # its epoch was closed
                if row is None or row.id in self._closed_ids:
                    return None
                generation = self._generation
                handle = await self._load(table, row)
                if handle is not None:
                    return handle
                if generation == self._generation and self._watch is None:
                    return None
            if generation != self._generation:
                raise WatchUnavailableError(
                    f"the epoch of table {table} could not be loaded: the proxy keeps losing "
                    "its watch session on the state database",
                    hint="check the state database's connections; then retry the statement",
                )
            return None

    async def _load(self, table: str, row: EpochRow) -> EpochHandle | None:
        """Load the epoch into memory and install its handle; None when it was closed (or the
        watch session was lost) meanwhile.

        With a watch, the epoch's shared watch lock is taken first and the epoch is then
        re-read as active (proxy/epoch_watch.py, step 2); the lock is kept while the handle
        lives. The handle is installed right after the last check, with no suspension point
        in between: a close notified before is seen, one notified after drops the handle.
        """
        watch = self._watch
        generation = self._generation
        if watch is not None and not await watch.hold(row.id):
            return None  # a close waits for the lock: the epoch is closed
        handle = None
        try:
            if watch is not None:
                again = await self.ledger.active_epoch(table)
                if again is None or again.id != row.id:
                    return None
            events = await self.ledger.events(row.id)
            state = await asyncio.to_thread(_loaded, [ev for _, ev in events])
            pin = await self.ledger.pinned(row.id, row.view_name, state.domain)
            if row.id in self._closed_ids or generation != self._generation:
                return None
            handle = EpochHandle(
                row=row,
                domain=state.domain,
                pin=pin,
                state=state,
                seq=events[-1][0] if events else 0,
            )
            self._handles[table] = handle
            self._closed_tables.discard(table)
            return handle
        finally:
            if handle is None and watch is not None:
                await watch.release(row.id)

    async def answer(self, plan: rewriter.Plan, *, max_error: float | None = None) -> Answer:
        """Answer a bound plan within the table's active epoch (see the module doc), at the
        standard error ``max_error`` asks for when given (``dp.engine.decide``)."""
        handle = await self._current(plan)
        while True:
            repeat = self._repeat(handle, plan.batch, max_error)
            if repeat is not None:
                return repeat
            try:
                return await self._grouped(handle, plan.batch, max_error)
            except _Reload:
                pass  # closed (or the watch lost) while this statement waited: reload
            except EpochLockedError:
                table = plan.table.split(".")[-1]
                await self._release(self._drop(table, handle))  # closed: reload, retry
                self._closed_tables.add(table)
            handle = await self._current(plan)

    async def preview(
        self, plan: rewriter.Plan, *, max_error: float | None = None
    ) -> engine.Preview:
        """The cost preview of a bound plan in the table's active epoch
        (``dp.engine.preview``): nothing is charged, drawn, stored or logged in the ledger.
        It reads this process's state of the epoch (another process's latest answers show
        once this one has folded them)."""
        handle = await self._current(plan)
        return await asyncio.to_thread(
            functools.partial(engine.preview, max_error=max_error), handle.state, plan.batch
        )

    async def _current(self, plan: rewriter.Plan) -> EpochHandle:
        """The loaded epoch of the plan's table, checked to cover the plan's columns."""
        table = plan.table.split(".")[-1]
        # Again when the epoch was closed (and maybe another started) or dropped meanwhile.
        for _attempt in range(_LOAD_ATTEMPTS):
            handle = await self._handle(table)
            if handle is None and table in self._closed_tables:
                break
            if handle is None:
                raise NoActiveEpochError(
                    f"no privacy epoch is active for table {table}",
                    hint=f"an administrator starts one with: lapras epoch start --table {table}",
                )
            batch = plan.batch
            if isinstance(batch.domain, UnitsDomain) and handle.pin.units is None:
                raise NoActiveEpochError(  # before anything is decided or charged
                    f"the active epoch on {table} keeps no rows per unit, so it answers no "
                    "question about units",
                    hint="start a new epoch (a table with a privacy_unit keeps them unless it "
                    "declares unit_questions = false)",
                )
            if not within(handle.domain, batch.domain):
                clamped = rewriter.clamped_since(handle.domain.names, batch.domain.names)
                if clamped:
                    raise OutsideEpochViewError(
                        f"the active epoch on {table} was started before {', '.join(clamped)} "
                        "was declared with clamp = true: it holds no values of it to sum",
                        hint="an administrator starts a new epoch (lapras epoch start), whose "
                        "pin carries the clamped values",
                    )
                raise OutsideEpochViewError(
                    f"the active epoch on {table} answers questions about {', '.join(handle.domain.names)} only",
                    hint="use only those columns, or ask an administrator for an epoch over "
                    "the whole table (lapras epoch start without --view)",
                )
            return handle
        raise NoActiveEpochError(
            f"the privacy epoch of table {table} was closed",
            hint=f"an administrator starts a new one with: lapras epoch start --table {table}",
        )

    async def public_rows(self, table: str, names: Sequence[str]) -> dict[str, Any]:
        """The rows of the declared public tables ``names`` (qualified) as the active epoch of
        ``table`` holds them: read at the epoch's first statement that joins them, stored with
        it (proxy.public_relations)."""
        handle = await self._handle(table)
        if handle is None:
            raise NoActiveEpochError(
                f"no privacy epoch is active for table {table}",
                hint=f"an administrator starts one with: lapras epoch start --table {table}",
            )
        decls = [d for d in self.schema.public.values() if d.qualified in names]
        return await public_relations.rows_of(
            self.ledger, handle.row.id, handle.public, decls, self.public_dsn
        )

    def answer_now(self, plan: rewriter.Plan, *, max_error: float | None = None) -> Answer | None:
        """The answer of an exact repeat in a loaded epoch, without waiting; None when the
        plan needs :meth:`answer` (no epoch loaded, outside its view, not a repeat, or a
        repeat less accurate than ``max_error`` asks: refused there)."""
        handle = self._handles.get(plan.table.split(".")[-1])
        if handle is None:
            return None
        return self._repeat(handle, plan.batch, max_error)

    @staticmethod
    def _repeat(
        handle: EpochHandle, batch: QueryBatch, max_error: float | None = None
    ) -> Answer | None:
        """An exact repeat is answered with the stored answer: no ledger, no noise (None
        when it does not meet ``max_error``: the engine refuses it, saying why)."""
        stored = handle.state.answers.get(batch.key)
        if stored is None:
            return None
        if max_error is not None and any(e > max_error * (1 + 1e-9) for e in stored.std_errors):
            return None
        return Answer(
            answers=stored.answers,
            std_errors=stored.std_errors,
            kind=engine.DecisionKind.REPEAT,
            charge=0.0,
            status=handle.status(),
        )

    async def _grouped(
        self, handle: EpochHandle, batch: QueryBatch, max_error: float | None = None
    ) -> Answer:
        """Queue the statement for the epoch's next group and wait for its outcome."""
        waiting = _Waiting(batch, asyncio.get_running_loop().create_future(), max_error)
        handle.queue.append(waiting)
        if handle.writer is None:
            handle.writer = asyncio.create_task(self._write(handle))
        return await waiting.outcome

    async def _write(self, handle: EpochHandle) -> None:
        """Write the epoch's groups while statements are queued: each group takes every
        statement queued when it starts (see :meth:`_commit_group`)."""
        try:
            while handle.queue:
                group = [w for w in handle.queue if not w.outcome.done()]
                handle.queue.clear()
                if handle.dropped:
                    for w in group:
                        w.outcome.set_exception(_Reload())
                elif group:
                    await self._commit_group(handle, group)
        finally:
            handle.writer = None
            for w in handle.queue:  # only when the task itself was cancelled (shutdown)
                w.outcome.cancel()
            handle.queue.clear()

    async def _commit_group(self, handle: EpochHandle, group: Sequence[_Waiting]) -> None:
        """One group commit (docs/admin.md, "Group commit").

        Holding the epoch exclusively (one advisory lock and one catch-up for the group):
        decide every statement in turn, each against the state after the previous ones'
        events -- first those that spend nothing, whose events are committed asynchronously
        and answered at once; then the others, whose events (the charges) are committed in
        ONE transaction, synchronously when there is a charge. Only after that commit is any
        noise drawn; the ``Released`` events are then committed in one more synchronous
        transaction, and only then are the fresh answers sent. A refusal refuses its
        statement only; an error of the ledger fails every statement still unanswered.
        The engine's work runs in worker threads: the event loop stays free.
        """
        try:
            async with self.ledger.exclusive(handle.row.id, handle.seq) as tx:
                if tx.new_events:  # appended by another proxy process
                    handle.state = await asyncio.to_thread(
                        _applied, handle.state, [ev for _, ev in tx.new_events]
                    )
                    handle.seq = tx.new_events[-1][0]
                batches = [w.batch for w in group]
                requests = [w.max_error for w in group]
                free, rest = await asyncio.to_thread(
                    _decided_group, handle.state, batches, requests
                )
                # 1. what spends nothing (MATRIX / STORED): asynchronous commit, answered now
                await tx.append(free.events(), durable=False)
                handle.state, handle.seq = free.state, tx.seq
                self._resolve(handle, group, free)
                # 2. the charges, with whatever else was decided after them: one transaction
                await tx.append(rest.events(), durable=rest.charges())
                handle.state, handle.seq = rest.state, tx.seq
                # The charges are committed: only now is any noise drawn.
                fresh = rest.fresh()
                if fresh:
                    results, state = await asyncio.to_thread(
                        engine.release_all, handle.state, fresh, handle.pin, self._sampler()
                    )
                    rest.released(results)
                    await tx.append([ev for r in results for ev in r.events])
                    handle.state, handle.seq = state, tx.seq
                self._resolve(handle, group, rest)
        except Exception as exc:
            for w in group:
                if not w.outcome.done():
                    w.outcome.set_exception(exc)
        except BaseException:  # cancelled (shutdown): nobody is answered from this group
            for w in group:
                w.outcome.cancel()
            raise

    @staticmethod
    def _resolve(handle: EpochHandle, group: Sequence[_Waiting], part: _Part) -> None:
        """Send the outcomes of ``part`` of the group (its events are committed)."""
        status = handle.status()
        for i, outcome in part.outcomes.items():
            w = group[i]
            if w.outcome.done():  # the client went away meanwhile
                continue
            if isinstance(outcome, BaseException):
                w.outcome.set_exception(outcome)
            else:
                w.outcome.set_result(dataclasses.replace(outcome, status=status))


def _loaded(events: Sequence[Any]) -> engine.EngineState:
    """The state of an epoch's ledger, warm (``engine.warm``: its first answers from the
    Matrix Mechanism release do not pay for what every later one reuses)."""
    return engine.warm(engine.fold(events))


def _applied(state: engine.EngineState, events: Sequence[Any]) -> engine.EngineState:
    for ev in events:
        state = engine.apply(state, ev)
    return state


#: A placeholder status of an outcome, replaced when the outcome is sent.
_NO_STATUS: Any = None


@dataclass(slots=True)
class _Part:
    """A part of a group: its statements' decisions (by index in the group), the state after
    their events, and each statement's outcome once known (an answer, or a refusal)."""

    state: engine.EngineState
    decisions: dict[int, engine.Decision] = dataclasses.field(default_factory=dict)
    outcomes: dict[int, Answer | BaseException] = dataclasses.field(default_factory=dict)
    #: Statements of the group with the same batch as an earlier fresh one: its outcome
    #: (as a repeat: refused when less accurate than the standard error it asks).
    same: dict[int, int] = dataclasses.field(default_factory=dict)
    asked: dict[int, float | None] = dataclasses.field(default_factory=dict)

    def events(self) -> list[Any]:
        return [ev for d in self.decisions.values() for ev in d.events]

    def charges(self) -> bool:
        return any(d.charge is not None for d in self.decisions.values())

    def fresh(self) -> list[engine.Decision]:
        return [d for d in self.decisions.values() if d.kind is engine.DecisionKind.FRESH]

    def decided(self, i: int, decision: engine.Decision) -> None:
        self.decisions[i] = decision
        self.state = _applied(self.state, decision.events)
        if decision.kind is not engine.DecisionKind.FRESH:
            assert decision.answers is not None and decision.std_errors is not None
            self.outcomes[i] = _answer(decision, decision.answers, decision.std_errors)

    def released(self, results: Sequence[engine.ReleaseResult]) -> None:
        """The fresh answers (in the order of :meth:`fresh`), and their duplicates'."""
        fresh = [i for i, d in self.decisions.items() if d.kind is engine.DecisionKind.FRESH]
        for i, r in zip(fresh, results, strict=True):
            self.outcomes[i] = _answer(self.decisions[i], r.answers, r.std_errors)
        for i, first in self.same.items():
            done = self.outcomes[first]
            limit = self.asked.get(i)
            if isinstance(done, BaseException):
                self.outcomes[i] = done
            elif limit is not None and any(e > limit * (1 + 1e-9) for e in done.std_errors):
                self.outcomes[i] = AccuracyUnavailableError(
                    f"the standard error asked (lapras.max_error = {limit:.4g}) is below that "
                    f"of this statement's earlier answer ({max(done.std_errors):.4g})",
                    hint="a statement answered before is answered again with its stored "
                    "answer, never measured anew; ask with a larger lapras.max_error",
                )
            else:
                self.outcomes[i] = dataclasses.replace(
                    done, kind=engine.DecisionKind.REPEAT, charge=0.0
                )


def _answer(
    decision: engine.Decision, answers: tuple[float, ...], std_errors: tuple[float, ...]
) -> Answer:
    return Answer(
        answers=answers,
        std_errors=std_errors,
        kind=decision.kind,
        charge=decision.charge.amount if decision.charge is not None else 0.0,
        status=_NO_STATUS,
    )


def _decided_group(
    state: engine.EngineState,
    batches: Sequence[QueryBatch],
    requests: Sequence[float | None] | None = None,
) -> tuple[_Part, _Part]:
    """Decide a group's statements, each against the state after the previous ones' events
    (applied here in memory; the caller persists them before it uses the state).

    First part: the statements answered from stored releases (MATRIX, STORED, repeats) when
    decided in arrival order with the fresh ones set aside. Second part: the statements set
    aside, decided again in arrival order after the first part (a fresh one may now be
    answered from stored releases, or refused -- a refusal refuses that statement only), and
    those with the same batch as an earlier fresh one of the group (they get its answer, as
    a repeat). Every decision depends only on public values: the batches, their order, the
    standard errors they ask for (``requests``) and the state's own, as for one statement at
    a time.
    """
    asked = list(requests) if requests is not None else [None] * len(batches)
    free = _Part(state)
    later: list[int] = []
    for i, batch in enumerate(batches):
        if not engine.may_spend_nothing(free.state, batch):
            later.append(i)  # certainly fresh (or refused): decided once, in the second part
            continue
        try:
            decision = engine.decide(free.state, batch, max_error=asked[i])
        except BudgetExhaustedError:
            later.append(i)  # refused in the second part (after the first's events)
            continue
        except Exception as exc:  # this statement only (an InternalError is a bug)
            free.outcomes[i] = exc
            continue
        if decision.kind is engine.DecisionKind.FRESH:
            later.append(i)
        else:
            free.decided(i, decision)
    rest = _Part(free.state)
    fresh_keys: dict[str, int] = {}
    for i in later:
        batch = batches[i]
        if batch.key in fresh_keys:
            rest.same[i] = fresh_keys[batch.key]
            rest.asked[i] = asked[i]
            continue
        try:
            decision = engine.decide(rest.state, batch, max_error=asked[i])
        except Exception as exc:  # a budget refusal (or a bug): this statement only
            rest.outcomes[i] = exc
            continue
        rest.decided(i, decision)
        if decision.kind is engine.DecisionKind.FRESH:
            fresh_keys[batch.key] = i
    return free, rest
