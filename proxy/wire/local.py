"""What a session holds itself: cursors and SQL-prepared statements over local answers.

A DP statement wrapped in ``DECLARE name CURSOR FOR`` is answered (and charged) once, at the
DECLARE; its rows become a :class:`Cursor` the session holds, which ``FETCH``, ``MOVE`` and
``CLOSE`` then address by name. ``PREPARE name AS`` keeps the statement (a :class:`Prepared`)
for ``EXECUTE``. The backend never sees either, so the session answers every command naming
them, and relays everything else untouched (:func:`rewriter.wrappers.command` reads the
commands).

One :class:`LocalObjects` per session, created and dropped with it (proxy.wire.session). It is
told of every transaction end the session sees while it holds a cursor made in the open
transaction: the command tags (``COMMIT``/``ROLLBACK``) and ReadyForQuery's status. As in
PostgreSQL, a cursor without HOLD goes at the end of its transaction; one WITH HOLD stays
when its transaction commits and goes when it rolls back (portalmem.c, AtCommit_Portals and
AtAbort_Portals). Subtransactions (``ROLLBACK TO SAVEPOINT``) do not drop cursors here, and
``COMMIT AND CHAIN`` does not end them (docs/sql.md).

:class:`Cursor` moves exactly as a PostgreSQL portal reading its hold store (pquery.c,
DoPortalRunFetch, PortalRunSelect, DoPortalRewind; tuplestore.c for the read position),
including the counts MOVE reports and ``cursor can only scan forward`` for NO SCROLL. A
cursor declared with neither SCROLL nor NO SCROLL scrolls (PostgreSQL decides by the plan,
which a local answer does not have).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.errors import NotInPrerequisiteState
from proxy.wire.router import AnswerLocally, Column, StatementInfo
from rewriter.wrappers import Fetch

#: FETCH ALL (PostgreSQL's FETCH_ALL, LONG_MAX).
FETCH_ALL = 2**63 - 1


def _forward_only() -> NotInPrerequisiteState:
    return NotInPrerequisiteState(
        "cursor can only scan forward",
        hint="Declare it with SCROLL option to enable backward scan.",
    )


@dataclass(slots=True, kw_only=True)
class Cursor:
    """A cursor over rows already made. ``pending``: made in the open transaction (its end
    decides whether the cursor stays)."""

    name: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[object, ...], ...]
    binary: bool = False
    no_scroll: bool = False
    hold: bool = False
    pending: bool = False
    # the portal's position (pquery.c): before the first row, after the last, how many
    # rows forward of the start it stands
    at_start: bool = True
    at_end: bool = False
    position: int = 0
    # the hold store's read pointer (tuplestore.c): the next row forward, end of file reached
    _current: int = 0
    _eof: bool = False

    def fetch(self, f: Fetch) -> tuple[list[tuple[object, ...]], int]:
        """The rows a FETCH returns (none for MOVE) and the count its tag reports."""
        rows = self._run_fetch(f.direction, FETCH_ALL if f.count is None else f.count, f.move)
        if isinstance(rows, int):
            return [], rows
        return ([] if f.move else rows), len(rows)

    # -- pquery.c, over a materialised result -----------------------------------------------

    def _run_fetch(self, direction: str, count: int, move: bool) -> list[tuple[object, ...]] | int:
        """DoPortalRunFetch; an int where PostgreSQL returns a count without rows (MOVE)."""
        if direction == "forward":
            if count < 0:
                direction, count = "backward", -count
        elif direction == "backward":
            if count < 0:
                direction, count = "forward", -count
        elif direction == "absolute":
            if count > 0:
                if self.position == FETCH_ALL or count - 1 <= self.position // 2:
                    self._rewind()
                    if count > 1:
                        self._select(True, count - 1)
                else:
                    pos = self.position + 1 if self.at_end else self.position
                    if count <= pos:
                        self._select(False, pos - count + 1)
                    elif count > pos + 1:
                        self._select(True, count - pos - 1)
                return self._select(True, 1)
            if count < 0:
                self._select(True, FETCH_ALL)
                if count < -1:
                    self._select(False, -count - 1)
                return self._select(False, 1)
            self._rewind()
            return self._select(True, 0)
        elif direction == "relative":
            if count > 0:
                if count > 1:
                    self._select(True, count - 1)
                return self._select(True, 1)
            if count < 0:
                if count < -1:
                    self._select(False, -count - 1)
                return self._select(False, 1)
            direction = "forward"
        forward = direction == "forward"
        if count == 0:
            on_row = not self.at_start and not self.at_end
            if move:
                return 1 if on_row else 0
            if on_row:
                self._select(False, 1)
                count, forward = 1, True
        if not forward and count == FETCH_ALL and move:
            result = self.position
            if result > 0 and not self.at_end:
                result -= 1
            self._rewind()
            return result
        return self._select(forward, count)

    def _select(self, forward: bool, count: int) -> list[tuple[object, ...]]:
        """PortalRunSelect: up to ``count`` rows (FETCH_ALL: all) in one direction."""
        if not forward and self.no_scroll:
            raise _forward_only()
        moving = not (self.at_end if forward else self.at_start) and count > 0
        limit = 0 if count == FETCH_ALL else count
        rows = self._read(forward, limit) if moving else []
        if moving:
            n = len(rows)
            if forward:
                if n > 0:
                    self.at_start = False
                if limit == 0 or n < limit:
                    self.at_end = True
                self.position += n
            else:
                if n > 0 and self.at_end:
                    self.at_end = False
                    self.position += 1
                if limit == 0 or n < limit:
                    self.at_start = True
                    self.position = 0
                else:
                    self.position -= n
        return rows

    def _rewind(self) -> None:
        """DoPortalRewind."""
        if self.at_start and not self.at_end:
            return
        if self.no_scroll:
            raise _forward_only()
        self._current, self._eof = 0, False
        self.at_start, self.at_end, self.position = True, False, 0

    def _read(self, forward: bool, limit: int) -> list[tuple[object, ...]]:
        """RunFromStore: rows until the store ends or ``limit`` (0: no limit) are read."""
        out: list[tuple[object, ...]] = []
        while True:
            row = self._next(forward)
            if row is None:
                return out
            out.append(row)
            if limit and len(out) == limit:
                return out

    def _next(self, forward: bool) -> tuple[object, ...] | None:
        """tuplestore_gettupleslot of an in-memory store."""
        n = len(self.rows)
        if forward:
            if self._eof:
                return None
            if self._current < n:
                self._current += 1
                return self.rows[self._current - 1]
            self._eof = True
            return None
        if self._eof:
            self._current, self._eof = n, False
        else:
            if self._current <= 0:
                return None
            self._current -= 1  # the last row returned
        if self._current <= 0:
            return None
        return self.rows[self._current - 1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A statement ``PREPARE name AS`` made here: its route (answered locally), the statement
    it was made by, and its parameter types (resolved)."""

    name: str
    route: AnswerLocally
    info: StatementInfo
    param_oids: tuple[int, ...]


@dataclass(slots=True)
class LocalObjects:
    """The cursors and SQL-prepared statements of one session."""

    cursors: dict[str, Cursor] = field(default_factory=dict)
    prepared: dict[str, Prepared] = field(default_factory=dict)
    #: a cursor made in the open transaction exists: the session reports command tags and
    #: transaction statuses (``saw_tag``, ``saw_status``) while this is true
    watching: bool = False
    _end_tag: bytes = b""

    def add_cursor(self, cursor: Cursor) -> None:
        self.cursors[cursor.name] = cursor
        if cursor.pending:
            self.watching = True

    def close(self, name: str) -> None:
        del self.cursors[name]
        self._rewatch()

    def close_all(self) -> None:
        self.cursors.clear()
        self._rewatch()

    def discard_all(self) -> None:
        """DISCARD ALL: every cursor and prepared statement goes."""
        self.cursors.clear()
        self.prepared.clear()
        self._rewatch()

    def saw_tag(self, tag: bytes) -> None:
        """A CommandComplete tag from the backend (watching only): the last COMMIT or
        ROLLBACK of the transaction says how it ends."""
        if tag in (b"COMMIT", b"ROLLBACK") or tag.startswith(b"PREPARE TRANSACTION"):
            self._end_tag = tag

    def saw_status(self, before: str, after: str) -> None:
        """A ReadyForQuery status from the backend (watching only)."""
        if after == "I" and before != "I":
            self.end_transaction(committed=before == "T" and self._end_tag == b"COMMIT")

    def end_transaction(self, *, committed: bool) -> None:
        """The open transaction ended: its cursors go, except the holdable ones of a
        transaction that committed (which now outlive it)."""
        for name, c in list(self.cursors.items()):
            if c.pending:
                if c.hold and committed:
                    c.pending = False
                else:
                    del self.cursors[name]
        self._end_tag = b""
        self._rewatch()

    def _rewatch(self) -> None:
        self.watching = any(c.pending for c in self.cursors.values())
        if not self.watching:
            self._end_tag = b""
