"""The durable privacy ledger: schema ``lapras`` in the state database, owned by the aggregator.

Tables (created and migrated by :func:`migrate`; versioned, idempotent):

- ``lapras.epochs``: one row per epoch (table, view, configuration, who started it and why);
  at most one *active* epoch per protected table (a partial unique index), so a budget is never
  reset silently: a new epoch over the same table is an explicit, logged admin act.
- ``lapras.ledger``: the epoch's engine events, append-only, numbered ``seq`` = 1, 2, ...
  (``dp.engine`` events encoded by :mod:`dp.engine_codec` as JSON). The engine's state is the fold of
  these events. The Matrix Mechanism release and every online answer are events too: they are
  the stored releases, never re-drawn.
- ``lapras.histograms``: the epoch's pinned data (``dp.pin``: the sparse exact histogram over
  the whole table's domain), computed once at the start, so every proxy and every restart
  answers from the same snapshot.
- ``lapras.query_log``, ``lapras.predictions``, ``lapras.admin_log``: the query log the
  predictor reads, its outputs, and the admin acts.

The state database (``[backend] state_dsn``) is one no analyst role may connect to
(``lapras provision``), so analysts cannot read these tables, size them or take their locks;
``REVOKE ALL ON SCHEMA lapras FROM PUBLIC`` is a second wall.

Charge before release (ARCHITECTURE.md §3 step 5): :meth:`Ledger.exclusive` takes a session
advisory lock on the epoch (serialising every proxy process sharing it), folds the events other
processes appended, and lets the caller append the decision's events in a transaction that
commits *before* any noise is drawn. A crash after that commit loses budget, never overspends.
The epoch service holds it once per *group* of concurrent statements (group commit,
:mod:`proxy.epochs`): all the group's charges are appended in one transaction, its releases
in one more.

Close (:meth:`PgLedger.close_epoch`): the epoch's row is marked closed and the close is
notified to every proxy process in one transaction; the close then waits, for a bounded time,
until every process serving the epoch from memory has dropped it (:mod:`proxy.epoch_watch`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import psycopg

from dp import engine_codec
from dp.domain import Domain
from dp.engine import EngineConfig
from dp.errors import BudgetExhaustedError, LaprasError
from dp.pin import MAGIC as PIN_MAGIC
from dp.pin import Pin
from proxy.epoch_watch import CHANNEL, CLOSE_WAIT, EpochWatch, Watch, confirm_close, holders

#: Versioned migrations; each runs once, in order, in one transaction.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE SCHEMA IF NOT EXISTS lapras;
    REVOKE ALL ON SCHEMA lapras FROM PUBLIC;
    CREATE TABLE lapras.epochs (
        id          bigserial PRIMARY KEY,
        table_name  text NOT NULL,
        view_name   text NOT NULL,
        status      text NOT NULL CHECK (status IN ('active', 'closed')),
        config      json NOT NULL,
        started_at  timestamptz NOT NULL DEFAULT now(),
        started_by  text NOT NULL,
        reason      text NOT NULL DEFAULT '',
        closed_at   timestamptz,
        closed_by   text
    );
    CREATE UNIQUE INDEX epochs_one_active ON lapras.epochs (table_name) WHERE status = 'active';
    CREATE TABLE lapras.ledger (
        epoch_id    bigint NOT NULL REFERENCES lapras.epochs (id),
        seq         integer NOT NULL,
        kind        text NOT NULL,
        payload     json NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (epoch_id, seq)
    );
    CREATE TABLE lapras.histograms (
        epoch_id    bigint NOT NULL REFERENCES lapras.epochs (id),
        view_name   text NOT NULL,
        cells       bytea NOT NULL,
        PRIMARY KEY (epoch_id, view_name)
    );
    CREATE TABLE lapras.query_log (
        id          bigserial PRIMARY KEY,
        logged_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
        analyst     text NOT NULL,
        table_name  text NOT NULL,
        view_name   text,
        template    text NOT NULL,
        bindings    json NOT NULL,
        query_key   text,
        outcome     text NOT NULL,
        sql         text
    );
    CREATE INDEX query_log_time ON lapras.query_log (table_name, logged_at);
    CREATE TABLE lapras.predictions (
        id          bigserial PRIMARY KEY,
        created_at  timestamptz NOT NULL DEFAULT now(),
        table_name  text NOT NULL,
        source      text NOT NULL,
        statements  json NOT NULL,
        report      json NOT NULL
    );
    CREATE TABLE lapras.admin_log (
        id          bigserial PRIMARY KEY,
        at          timestamptz NOT NULL DEFAULT now(),
        actor       text NOT NULL,
        action      text NOT NULL,
        details     json NOT NULL
    );
    """,
    # A pin is stored uncompressed and out of line: its size is then a function of the domain
    # and of its padded size class only (dp.pin), never of the counts (TOAST compression would
    # shrink it by an amount that depends on them).
    """
    ALTER TABLE lapras.histograms ALTER COLUMN cells SET STORAGE EXTERNAL;
    """,
    # Identical statements logged together are one row with their number of calls.
    """
    ALTER TABLE lapras.query_log ADD COLUMN calls integer NOT NULL DEFAULT 1;
    """,
    # The budget group an epoch spends from (NULL in older rows: its table's name).
    """
    ALTER TABLE lapras.epochs ADD COLUMN budget_group text;
    """,
    # The rows of declared public tables an epoch's statements join (proxy.public_relations):
    # read once per epoch, stored so that every process answers from the same content.
    """
    CREATE TABLE lapras.public_rows (
        epoch_id    bigint NOT NULL REFERENCES lapras.epochs (id),
        name        text NOT NULL,
        rows        json NOT NULL,
        read_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (epoch_id, name)
    );
    """,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lifetime:
    """A budget group's cap across epochs and what its epochs have committed.

    Composition: every epoch is ``(epsilon_i, delta_i)``-DP for its units (its accountant
    admits nothing beyond its configured budget), so all the epochs of a group together are
    ``(sum epsilon_i, sum delta_i)``-DP by basic composition (Dwork & Roth 2014, Thm 3.16),
    whatever each epoch's accountant. An epoch's whole budget counts from its start, spent or
    not (a closed epoch's unspent budget is not returned): the cap is checked, with the
    group's lock held, before the epoch exists -- the filter of ARCHITECTURE.md §4 one level
    up. ``tables``: the group's tables; an epoch counts when it was started in the group or
    on one of its tables.
    """

    group: str
    tables: tuple[str, ...]
    epsilon: float
    delta: float
    committed_epsilon: float = 0.0
    committed_delta: float = 0.0
    epochs: int = 0

    def admits(self, config: EngineConfig) -> bool:
        slack = 1e-12
        return (
            self.committed_epsilon + config.epsilon <= self.epsilon * (1 + slack)
            and self.committed_delta + config.delta <= self.delta * (1 + slack) + 1e-300
        )

    def refusal(self, config: EngineConfig) -> LifetimeBudgetExhaustedError:
        return LifetimeBudgetExhaustedError(
            f"the lifetime budget of {self.group} does not admit this epoch: its {self.epochs}"
            f" epoch(s) have committed epsilon {self.committed_epsilon:.6g}, delta"
            f" {self.committed_delta:.3g} of epsilon {self.epsilon:.6g}, delta {self.delta:.3g},"
            f" and this one asks for epsilon {config.epsilon:.6g}, delta {config.delta:.3g}",
            hint="start it with a smaller --epsilon / --delta; a higher lifetime_epsilon is a "
            "decision for whoever answers for the people in the data",
        )


class LifetimeBudgetExhaustedError(BudgetExhaustedError):
    """A new epoch would take its budget group past its lifetime cap."""


_MIGRATE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('lapras.migrate'))"
_MIGRATIONS_TABLE = (
    "CREATE SCHEMA IF NOT EXISTS lapras;"
    "CREATE TABLE IF NOT EXISTS lapras.migrations ("
    " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
)
_CURRENT = "SELECT coalesce(max(version), 0) FROM lapras.migrations"
_APPLIED = "INSERT INTO lapras.migrations (version) VALUES (%s)"


async def migrate(conn: psycopg.AsyncConnection[Any]) -> int:
    """Bring schema ``lapras`` to the latest version; return it. Safe to run concurrently."""
    async with conn.transaction():
        # Serialise concurrent migrators (several proxies starting at once).
        await conn.execute(_MIGRATE_LOCK)
        await conn.execute(_MIGRATIONS_TABLE)
        cur = await conn.execute(_CURRENT)
        row = await cur.fetchone()
        current = int(row[0]) if row else 0
        for version, script in enumerate(MIGRATIONS, start=1):
            if version > current:
                await conn.execute(script)
                await conn.execute(_APPLIED, (version,))
    return len(MIGRATIONS)


def migrate_sync(conn: psycopg.Connection[Any]) -> int:
    """:func:`migrate` on a synchronous connection (``lapras provision``)."""
    with conn.transaction():
        conn.execute(_MIGRATE_LOCK)
        conn.execute(_MIGRATIONS_TABLE)
        row = conn.execute(_CURRENT).fetchone()
        current = int(row[0]) if row else 0
        for version, script in enumerate(MIGRATIONS, start=1):
            if version > current:
                conn.execute(script)
                conn.execute(_APPLIED, (version,))
    return len(MIGRATIONS)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochRow:
    id: int
    table_name: str
    view_name: str
    status: str
    started_by: str
    reason: str
    started_at: str
    closed_at: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedEpoch(EpochRow):
    """The row of an epoch just closed, and what the proxy processes serving it did.

    ``serving``: the processes that held the epoch in memory when the close committed;
    ``unconfirmed``: those of them that had not dropped it when the close stopped waiting (0
    when every one confirmed: none of them answers from the epoch any more).
    """

    serving: int = 0
    unconfirmed: int = 0

    @staticmethod
    def of(row: EpochRow, *, serving: int, unconfirmed: int) -> ClosedEpoch:
        return ClosedEpoch(**dataclasses.asdict(row), serving=serving, unconfirmed=unconfirmed)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One ledger row for the admin views: its number, kind, commit time and decoded event."""

    seq: int
    kind: str
    at: str
    event: object


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminEntry:
    """One row of the admin log (epoch start / close: who, when, why)."""

    at: str
    actor: str
    action: str
    details: dict[str, Any]


class EpochConflictError(LaprasError):
    """55006 object_in_use: an epoch is already active for the table."""

    sqlstate = "55006"


class Appender(Protocol):
    async def append(self, events: Sequence[object], *, durable: bool = True) -> None: ...


class Ledger(Protocol):
    """What the epoch service needs from a ledger (PostgreSQL, or in memory for tests)."""

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
    ) -> int: ...

    async def lifetime(self, cap: Lifetime) -> Lifetime:
        """``cap`` with what its group's epochs have committed."""
        ...

    async def active_epoch(self, table: str) -> EpochRow | None: ...

    async def epochs(self, table: str | None = None) -> list[EpochRow]: ...

    async def close_epoch(
        self, table: str, *, actor: str, reason: str, wait: float = CLOSE_WAIT
    ) -> ClosedEpoch | None: ...

    def watch(self) -> Watch:
        """A new, unstarted watch on this ledger's store (one per proxy process)."""
        ...

    async def pinned(self, epoch_id: int, view: str, domain: Domain) -> Pin: ...

    async def public_rows(self, epoch_id: int, name: str) -> list[list[str | None]] | None: ...

    async def keep_public_rows(
        self, epoch_id: int, name: str, rows: list[list[str | None]]
    ) -> list[list[str | None]]: ...

    async def events(self, epoch_id: int, after: int = 0) -> list[tuple[int, object]]: ...

    def exclusive(self, epoch_id: int, after: int) -> Any: ...

    async def log_queries(self, records: Sequence[dict[str, Any]]) -> None: ...

    async def prune_log(self, *, max_days: float, max_rows: int) -> int: ...

    async def history(self, epoch_id: int, limit: int) -> list[LedgerEntry]: ...

    async def admin_log(self, limit: int) -> list[AdminEntry]: ...


def encode(event: Any) -> tuple[str, str]:
    """``(kind, payload)`` of a ledger row: the event's class name and its JSON text."""
    return type(event).__name__, json.dumps(engine_codec.encode_event(event), allow_nan=False)


def decode(payload: str) -> Any:
    """The event of a ledger row (the codec checks every batch key: edits are detected)."""
    return engine_codec.decode_event(json.loads(payload))


#: Ledger rows up to this many bytes of JSON are decoded on the event loop (the common case:
#: the one or two events another process appended); larger reads go to a worker thread.
_DECODE_ON_LOOP = 64 * 1024


def _decoded(rows: Sequence[Sequence[Any]]) -> list[tuple[int, object]]:
    return [(int(seq), decode(payload)) for seq, payload in rows]


async def _decoded_off_loop(rows: Sequence[Sequence[Any]]) -> list[tuple[int, object]]:
    """The events of ledger rows ``(seq, payload)``. A large read (a replay, or a Matrix
    Mechanism release, whose decoding factorises it) is decoded in a worker thread, so that
    the other sessions of the process never wait for it."""
    if sum(len(payload) for _, payload in rows) > _DECODE_ON_LOOP:
        return await asyncio.to_thread(_decoded, rows)
    return _decoded(rows)


def pin_from_bytes(domain: Domain, cells: bytes) -> Pin:
    """A stored pin (or the dense little-endian float64 histogram an older epoch stored)."""
    if cells.startswith(PIN_MAGIC):
        return Pin.from_bytes(domain, cells)
    return Pin.from_dense(domain, np.frombuffer(cells, dtype="<f8").astype(np.float64))


def _row(r: Sequence[Any]) -> EpochRow:
    return EpochRow(
        id=int(r[0]),
        table_name=r[1],
        view_name=r[2],
        status=r[3],
        started_by=r[4],
        reason=r[5],
        started_at=str(r[6]),
        closed_at=None if r[7] is None else str(r[7]),
    )


#: First key of the two-key advisory locks on epochs ("LAPR"), so that they never collide with
#: one-key advisory locks other software takes in the same database.
_LOCK_SPACE = 0x4C415052
#: First key of the budget groups' locks ("LAPL").
_LIFETIME_SPACE = 0x4C41504C
#: Seconds :meth:`PgLedger.close` waits for a statement in flight before closing under it.
CLOSE_GRACE = 5.0

_EPOCH_COLUMNS = "id, table_name, view_name, status, started_by, reason, started_at, closed_at"


class EpochLockedError(RuntimeError):
    """Raised when an epoch's row says closed while a process still uses it."""


@dataclass(slots=True)
class _PgTransaction:
    conn: psycopg.AsyncConnection[Any]
    epoch_id: int
    seq: int
    new_events: list[tuple[int, object]]

    async def append(self, events: Sequence[object], *, durable: bool = True) -> None:
        """Append and commit ``events``; ``durable=False`` commits asynchronously (used only
        for events that charge nothing: losing them in a crash cannot overspend).

        One statement, one round trip: the INSERT of every row (a column array each, in
        binary) is its own transaction, committed when PostgreSQL acknowledges it (inside an
        enclosing transaction, ``create_epoch``'s, part of that one). The statement sets its
        own ``synchronous_commit``: ``on`` for a durable append (acknowledged once flushed to
        disk), ``off`` otherwise."""
        if not events:
            return
        seqs, kinds, payloads = [], [], []
        for ev in events:
            self.seq += 1
            kind, payload = encode(ev)
            seqs.append(self.seq)
            kinds.append(kind)
            payloads.append(payload)
        # set_config(..., true) is SET LOCAL: it holds until this statement's commit
        await self.conn.execute(
            "INSERT INTO lapras.ledger (epoch_id, seq, kind, payload)"
            " SELECT %s, s, k, p::json FROM unnest(%b::int4[], %b::text[], %b::text[])"
            " AS u(s, k, p), (SELECT set_config('synchronous_commit', %s, true)) AS c",
            (self.epoch_id, seqs, kinds, payloads, "on" if durable else "off"),
        )


class PgLedger:
    """The ledger in PostgreSQL, through one connection of the aggregator role.

    One asyncio lock guards the connection; :meth:`exclusive` additionally holds a session
    advisory lock on the epoch for the whole decide → charge → release → store sequence of a
    group of statements, so that proxy processes sharing an epoch never interleave.
    """

    def __init__(self, conn: psycopg.AsyncConnection[Any], dsn: str | None = None) -> None:
        self._conn = conn
        self._dsn = dsn
        self._lock = asyncio.Lock()
        # The query log's writes go through a connection of their own (opened at the first
        # write), so they never wait for, nor hold up, a charge on the ledger's connection.
        self._log_conn: psycopg.AsyncConnection[Any] | None = None
        self._log_lock = asyncio.Lock()

    @staticmethod
    async def _open(dsn: str) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        # Charges must be durable whatever the server's or the role's default is; events that
        # charge nothing opt out per transaction (append(durable=False)).
        await conn.execute("SET synchronous_commit = on")
        return conn

    @staticmethod
    async def connect(dsn: str) -> PgLedger:
        conn = await PgLedger._open(dsn)
        await migrate(conn)
        return PgLedger(conn, dsn)

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        """The connection, exclusively; reopened first if it was lost (a backend restart).

        A statement that was running when the connection broke fails (the client gets an
        error); the next one reconnects. Nothing is retried blindly: a charge whose commit
        was not acknowledged is treated as not made only if it is absent from the ledger,
        which the next fold shows.
        """
        async with self._lock:
            if self._conn.closed and self._dsn is not None:
                self._conn = await PgLedger._open(self._dsn)
            yield

    async def close(self) -> None:
        """Close both connections once what runs on each has finished (:meth:`_idle`)."""
        async with self._idle(self._lock):
            await self._conn.close()
        async with self._idle(self._log_lock):
            if self._log_conn is not None:
                await self._log_conn.close()

    @staticmethod
    @asynccontextmanager
    async def _idle(lock: asyncio.Lock) -> AsyncIterator[None]:
        """The connection's lock, waited for at most :data:`CLOSE_GRACE` seconds (then
        without it). A group commit's last step can still run after its statements were
        answered; a connection closed under a statement that waits for its reply leaves the
        socket registered with the event loop, and the next connection given the same file
        descriptor then fails to connect ("connection socket closed")."""
        try:
            await asyncio.wait_for(lock.acquire(), CLOSE_GRACE)
        except TimeoutError:
            yield  # a statement is stuck: closed under it
            return
        try:
            yield
        finally:
            lock.release()

    @asynccontextmanager
    async def _log_locked(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The query log's connection, exclusively (the ledger's own without a DSN)."""
        if self._dsn is None:
            async with self._locked():
                yield self._conn
            return
        async with self._log_lock:
            if self._log_conn is None or self._log_conn.closed:
                self._log_conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            yield self._log_conn

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
        """Create the epoch, its pin and its first events in one transaction; with a
        ``lifetime`` cap, only when the group admits it (checked under the group's lock).
        ``group``: the budget group recorded with the epoch (default: the table's name)."""
        config_json = json.dumps(engine_codec.encode_config(config), allow_nan=False)
        group = lifetime.group if lifetime is not None else (group or table)
        async with self._locked(), self._conn.transaction():
            if lifetime is not None:
                await self._conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LIFETIME_SPACE, group)
                )
                known = await self._committed(lifetime)
                if not known.admits(config):
                    raise known.refusal(config)
            try:
                cur = await self._conn.execute(
                    "INSERT INTO lapras.epochs"
                    " (table_name, view_name, status, config, started_by, reason, budget_group)"
                    " VALUES (%s, %s, 'active', %s, %s, %s, %s) RETURNING id",
                    (table, view, config_json, actor, reason, group),
                )
            except psycopg.errors.UniqueViolation:
                raise conflict_error(table) from None
            row = await cur.fetchone()
            assert row is not None
            epoch_id = int(row[0])
            await self._conn.execute(
                "INSERT INTO lapras.histograms (epoch_id, view_name, cells) VALUES (%s, %s, %s)",
                (epoch_id, view, pin.to_bytes()),
            )
            tx = _PgTransaction(self._conn, epoch_id, 0, [])
            await tx.append(events)
            await self._admin(
                actor,
                "epoch start",
                {"epoch": epoch_id, "table": table, "view": view, "reason": reason},
            )
        return epoch_id

    async def lifetime(self, cap: Lifetime) -> Lifetime:
        async with self._locked():
            return await self._committed(cap)

    async def _committed(self, cap: Lifetime) -> Lifetime:
        cur = await self._conn.execute(
            "SELECT coalesce(sum((config->>'epsilon')::float8), 0),"
            " coalesce(sum((config->>'delta')::float8), 0), count(*) FROM lapras.epochs"
            " WHERE coalesce(budget_group, table_name) = %s OR table_name = ANY(%s)",
            (cap.group, list(cap.tables)),
        )
        row = await cur.fetchone()
        assert row is not None
        return dataclasses.replace(
            cap, committed_epsilon=float(row[0]), committed_delta=float(row[1]), epochs=int(row[2])
        )

    async def _admin(self, actor: str, action: str, details: dict[str, Any]) -> None:
        await self._conn.execute(
            "INSERT INTO lapras.admin_log (actor, action, details) VALUES (%s, %s, %s)",
            (actor, action, json.dumps(details)),
        )

    async def active_epoch(self, table: str) -> EpochRow | None:
        async with self._locked():
            cur = await self._conn.execute(
                f"SELECT {_EPOCH_COLUMNS} FROM lapras.epochs WHERE table_name = %s AND status = 'active'",
                (table,),
            )
            row = await cur.fetchone()
        return None if row is None else _row(row)

    async def epochs(self, table: str | None = None) -> list[EpochRow]:
        async with self._locked():
            cur = await self._conn.execute(
                f"SELECT {_EPOCH_COLUMNS} FROM lapras.epochs"
                " WHERE %s::text IS NULL OR table_name = %s ORDER BY id",
                (table, table),
            )
            rows = await cur.fetchall()
        return [_row(r) for r in rows]

    async def close_epoch(
        self, table: str, *, actor: str, reason: str, wait: float = CLOSE_WAIT
    ) -> ClosedEpoch | None:
        """Close the table's active epoch; then wait, at most ``wait`` seconds, until every
        proxy process serving it from memory has dropped it (:mod:`proxy.epoch_watch`).

        After the commit no charge is admitted on the epoch (:meth:`exclusive` reads its row);
        when this returns with ``unconfirmed == 0``, no proxy process answers from it either,
        repeats included.
        """
        async with self._locked():
            async with self._conn.transaction():
                cur = await self._conn.execute(
                    "SELECT id FROM lapras.epochs WHERE table_name = %s AND status = 'active'",
                    (table,),
                )
                active = await cur.fetchone()
                if active is None:
                    return None
                # Wait for any answer in flight (it holds the epoch's advisory lock): no event
                # is ever appended to an epoch after it was closed.
                await self._conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, int(active[0]))
                )
                cur = await self._conn.execute(
                    "UPDATE lapras.epochs SET status = 'closed', closed_at = now(), closed_by = %s"
                    f" WHERE id = %s AND status = 'active' RETURNING {_EPOCH_COLUMNS}",
                    (actor, int(active[0])),
                )
                row = await cur.fetchone()
                if row is None:
                    return None
                await self._admin(
                    actor, "epoch close", {"epoch": int(row[0]), "table": table, "reason": reason}
                )
                # Delivered at the commit, to every proxy process's watch session.
                await self._conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(int(row[0]))))
                serving = await holders(self._conn, int(row[0]))
            served, unconfirmed = await confirm_close(self._conn, int(row[0]), wait, serving)
        return ClosedEpoch.of(_row(row), serving=served, unconfirmed=unconfirmed)

    def watch(self) -> EpochWatch:
        """A new, unstarted watch session on this ledger's database (one per proxy process)."""
        if self._dsn is None:
            raise ValueError("a watch needs the ledger's DSN (PgLedger.connect)")
        return EpochWatch(self._dsn)

    async def pinned(self, epoch_id: int, view: str, domain: Domain) -> Pin:
        async with self._locked():
            cur = await self._conn.execute(
                "SELECT cells FROM lapras.histograms WHERE epoch_id = %s AND view_name = %s",
                (epoch_id, view),
            )
            row = await cur.fetchone()
        if row is None:
            raise LookupError("the epoch has no pinned histogram")
        return await asyncio.to_thread(pin_from_bytes, domain, bytes(row[0]))

    async def public_rows(self, epoch_id: int, name: str) -> list[list[str | None]] | None:
        """The rows of public table ``name`` stored with the epoch (None: not read yet)."""
        async with self._locked():
            cur = await self._conn.execute(
                "SELECT rows FROM lapras.public_rows WHERE epoch_id = %s AND name = %s",
                (epoch_id, name),
            )
            row = await cur.fetchone()
        return None if row is None else list(row[0])

    async def keep_public_rows(
        self, epoch_id: int, name: str, rows: list[list[str | None]]
    ) -> list[list[str | None]]:
        """Store the rows of public table ``name`` with the epoch, unless some were stored
        first (another process): the stored rows, either way."""
        async with self._locked(), self._conn.transaction():
            await self._conn.execute(
                "INSERT INTO lapras.public_rows (epoch_id, name, rows) VALUES (%s, %s, %s)"
                " ON CONFLICT (epoch_id, name) DO NOTHING",
                (epoch_id, name, json.dumps(rows)),
            )
            cur = await self._conn.execute(
                "SELECT rows FROM lapras.public_rows WHERE epoch_id = %s AND name = %s",
                (epoch_id, name),
            )
            row = await cur.fetchone()
        assert row is not None
        return list(row[0])

    async def events(self, epoch_id: int, after: int = 0) -> list[tuple[int, object]]:
        async with self._locked():
            return await self._events(epoch_id, after)

    async def _events(self, epoch_id: int, after: int) -> list[tuple[int, object]]:
        cur = await self._conn.execute(
            "SELECT seq, payload::text FROM lapras.ledger WHERE epoch_id = %s AND seq > %s ORDER BY seq",
            (epoch_id, after),
        )
        return await _decoded_off_loop(await cur.fetchall())

    @asynccontextmanager
    async def exclusive(self, epoch_id: int, after: int) -> AsyncIterator[_PgTransaction]:
        """Hold the epoch exclusively; yield the events appended since ``after`` and an appender."""
        async with self._locked():
            await self._conn.execute("SELECT pg_advisory_lock(%s, %s)", (_LOCK_SPACE, epoch_id))
            try:
                # the epoch's status and its events since ``after``, in one statement (its
                # snapshot is taken now that the lock is held)
                cur = await self._conn.execute(
                    "SELECT e.status, l.seq, l.payload::text FROM lapras.epochs e"
                    " LEFT JOIN lapras.ledger l ON l.epoch_id = e.id AND l.seq > %s"
                    " WHERE e.id = %s ORDER BY l.seq",
                    (after, epoch_id),
                )
                rows = await cur.fetchall()
                if not rows or rows[0][0] != "active":
                    raise EpochLockedError("the epoch was closed")
                new = await _decoded_off_loop([r[1:] for r in rows if r[1] is not None])
                yield _PgTransaction(self._conn, epoch_id, new[-1][0] if new else after, new)
            finally:
                await self._conn.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", (_LOCK_SPACE, epoch_id)
                )

    async def log_queries(self, records: Sequence[dict[str, Any]]) -> None:
        """Append to the query log in one transaction, committed asynchronously (it charges
        nothing: losing the last rows in a crash of PostgreSQL costs only predictor input), so
        that it holds the ledger connection for a round trip, not for an fsync."""
        if not records:
            return
        rows = [
            {**r, "bindings": json.dumps(r["bindings"], default=str), "calls": r.get("calls", 1)}
            for r in records
        ]
        # One statement for the whole batch (a column array each, sent in binary: a text
        # array's text form quotes and escapes every element), not one per row.
        columns = [
            [r[c] for r in rows]
            for c in ("analyst", "table", "view", "template", "bindings", "key", "outcome", "sql")
        ]
        calls = [int(r["calls"]) for r in rows]
        async with self._log_locked() as conn, conn.transaction():
            await conn.execute("SET LOCAL synchronous_commit = off")
            await conn.execute(
                "INSERT INTO lapras.query_log"
                " (analyst, table_name, view_name, template, bindings, query_key, outcome, sql, calls)"
                " SELECT a, t, v, tp, b::json, k, o, s, c FROM unnest("
                + ", ".join(["%b::text[]"] * 8)
                + ", %b::int4[]) AS u(a, t, v, tp, b, k, o, s, c)",
                [*columns, calls],
            )

    async def prune_log(self, *, max_days: float, max_rows: int) -> int:
        """Retention of the query log: delete the rows older than ``max_days`` days, then all
        but the newest ``max_rows``; returns how many were deleted (asynchronous commit, on
        the log's connection)."""
        async with self._log_locked() as conn, conn.transaction():
            await conn.execute("SET LOCAL synchronous_commit = off")
            old = await conn.execute(
                "DELETE FROM lapras.query_log WHERE logged_at < now() - make_interval(secs => %s)",
                (float(max_days) * 86400.0,),
            )
            extra = await conn.execute(
                "DELETE FROM lapras.query_log WHERE id <= (SELECT id FROM lapras.query_log"
                " ORDER BY id DESC OFFSET %s LIMIT 1)",
                (int(max_rows),),
            )
            return max(old.rowcount, 0) + max(extra.rowcount, 0)

    async def history(self, epoch_id: int, limit: int) -> list[LedgerEntry]:
        """The epoch's last ``limit`` ledger rows, newest first."""
        async with self._locked():
            cur = await self._conn.execute(
                "SELECT seq, kind, created_at, payload::text FROM lapras.ledger"
                " WHERE epoch_id = %s ORDER BY seq DESC LIMIT %s",
                (epoch_id, limit),
            )
            rows = await cur.fetchall()
        return [
            LedgerEntry(seq=int(r[0]), kind=r[1], at=str(r[2]), event=decode(r[3])) for r in rows
        ]

    async def admin_log(self, limit: int) -> list[AdminEntry]:
        """The last ``limit`` admin acts, newest first."""
        async with self._locked():
            cur = await self._conn.execute(
                "SELECT at, actor, action, details::text FROM lapras.admin_log"
                " ORDER BY id DESC LIMIT %s",
                (limit,),
            )
            rows = await cur.fetchall()
        return [
            AdminEntry(at=str(r[0]), actor=r[1], action=r[2], details=json.loads(r[3]))
            for r in rows
        ]


def conflict_error(table: str) -> EpochConflictError:
    """The refusal to start a second active epoch on a table (every ledger, every caller)."""
    return EpochConflictError(
        f"an epoch is already active for table {table}",
        hint="close it first (lapras epoch close): a budget is never reset silently",
    )


class StateUnavailableError(LaprasError):
    """The proxy's connection to its state database failed while a statement needed it:
    the backend's SQLSTATE when it sent one (``57P01`` when an administrator terminated the
    connection, ``57P02``/``57P03`` at a shutdown or crash), else ``08006``
    connection_failure. An ERROR of the statement, not of the analyst's session: the next
    statement reconnects (:meth:`PgLedger._locked`)."""

    sqlstate = "08006"


def unavailable_error(error: psycopg.Error) -> StateUnavailableError:
    """The refusal of a statement that met a broken state-database connection (the backend's
    text is not forwarded: a fixed message per case)."""
    code = error.sqlstate if error.sqlstate and error.sqlstate[:2] in ("57", "08") else None
    err = StateUnavailableError(
        "the proxy's connection to its state database was "
        + ("terminated by an administrator command" if code == "57P01" else "lost")
        + "; the statement was not answered",
        hint="run it again: the proxy reconnects (a stored answer is returned as before, "
        "a charge that was committed is not made twice)",
    )
    if code is not None:
        err.sqlstate = code  # type: ignore[misc]
    return err
