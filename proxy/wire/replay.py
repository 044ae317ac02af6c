"""The session's two replay caches: whole reads relayed again without decoding them.

**Client reads.** A client read of Bind, Execute and Sync messages that was relayed whole from
a clean state (nothing owed, no batch open, no portal answered here) leaves the same state
every time it comes in that state while its Binds' statements are still relayed: the route of
those messages depends on nothing else (the session's fast lane). Clients repeat such reads
for every execution of a prepared statement (asyncpg, psycopg's prepared statements, JDBC), so
the session remembers, by the read's bytes and the state it came in, the state it left, and
relays a repeat as it came without decoding it again. (Relaying to the backend is never a
privacy question: the passthrough role reads no protected table. What this must keep exact is
the protocol state.)

**Backend reads.** The backend's side of the same memory: a read that completes every
expectation, with rows and completions relayed as they came and a ReadyForQuery last, leaves
the same state each time it comes for the same expectations in the same state
(:meth:`proxy.wire.relay.BackendRelay.feed`). A repeated query's replies are such reads.

Both keep the states as values: a :class:`~proxy.wire.protocol.ConnSnapshot` of the
connection's state machine and a :class:`~proxy.wire.relay.RelaySnapshot` of the relay, and a
replay restores them (``restore``), never writing a field of either. Sans-IO: the session
checks what only it knows (no portal answered here, the fast lane open, the Binds' statements
still relayed) and writes the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.wire.protocol import ConnSnapshot, ConnState, ServerConnection
from proxy.wire.relay import TRACKED, BackendRelay, Expect, Kind, RelaySnapshot

# Reads remembered per session, of each kind, and the largest one.
MEMO_READS = 32
MEMO_READ = 1024

_Z = ord("Z")
_CLEAN_STATES = frozenset({ConnState.READY, ConnState.IN_TRANSACTION})

#: The key of a backend read: the kinds of the expectations it may answer (first), the
#: connection's state, the read's bytes.
ReplyKey = tuple[tuple[Kind, ...], ConnSnapshot, bytes]


@dataclass(frozen=True, slots=True)
class RelayedRead:
    """A client read relayed whole from a clean state: its Binds' statements, and the state
    it left."""

    binds: tuple[str, ...]
    conn: ConnSnapshot
    relay: RelaySnapshot


class ReplayMemory:
    """The reads one session relayed whole, by the state they came in and their bytes."""

    def __init__(self) -> None:
        self.reads: dict[tuple[ConnSnapshot, bytes], RelayedRead] = {}
        self.replies: dict[ReplyKey, ConnSnapshot] = {}

    # ------------------------------------------------------------ client reads

    @staticmethod
    def clean(conn: ServerConnection, relay: BackendRelay) -> ConnSnapshot | None:
        """The connection's state when nothing is owed or open (the session also checks that
        no portal is answered here), else None."""
        if (
            conn.state in _CLEAN_STATES
            and not relay.pending
            and not conn.batch_open
            and conn.pending_ready == 0
            and not relay.upstream_open
        ):
            return conn.snapshot()
        return None

    def remember_read(
        self,
        before: ConnSnapshot,
        data: bytes,
        binds: tuple[str, ...],
        conn: ServerConnection,
        relay: BackendRelay,
    ) -> None:
        """``data``, relayed whole from the clean state ``before``, left this state."""
        if any(
            not (e.forward and e.forward_ready) or e.sink or e.on_fail or e.failed
            for e in relay.pending
        ):
            return
        if len(self.reads) >= MEMO_READS:
            self.reads.clear()
        self.reads[(before, data)] = RelayedRead(
            binds=binds, conn=conn.snapshot(), relay=relay.snapshot()
        )

    def known_read(self, before: ConnSnapshot, data: bytes) -> RelayedRead | None:
        return self.reads.get((before, data))

    @staticmethod
    def replay_read(known: RelayedRead, conn: ServerConnection, relay: BackendRelay) -> None:
        """Leave the state the read left before (the session has relayed its bytes)."""
        conn.restore(known.conn)
        relay.restore(known.relay)

    # ------------------------------------------------------------ backend reads

    @staticmethod
    def reply_key(conn: ServerConnection, relay: BackendRelay, data: bytes) -> ReplyKey | None:
        """The key of a backend read: what it may answer and the state it comes in; None when
        an expectation is not relayed to the client (the session also checks that no portal
        is answered here and no cursor watches the transaction)."""
        if not relay.pending or len(data) > MEMO_READ:
            return None
        kinds = []
        for e in relay.pending:
            # (an on_fail callback is never called by such a read: it has no error, and it
            # is only remembered if no expectation was skipped -- see remember_reply)
            if not (e.forward and e.forward_ready) or e.sink is not None:
                return None
            kinds.append(e.kind)
        return (tuple(kinds), conn.snapshot(), data)

    def remember_reply(
        self,
        key: ReplyKey,
        before: list[Expect],
        frames: list[bytes],
        out: bytes | bytearray,
        conn: ServerConnection,
        relay: BackendRelay,
    ) -> None:
        """The read of ``key`` was handled frame by frame (the expectations ``before`` it,
        ``out`` what went to the client): remember the state it left if it answered
        everything, relaying every frame as it came."""
        if (
            relay.pending
            or frames[-1][0] != _Z
            or any(f[0] in TRACKED for f in frames[:-1])
            or any(e.failed for e in before)
            or out != key[-1]
        ):
            return
        if len(self.replies) >= MEMO_READS:
            self.replies.clear()
        self.replies[key] = conn.snapshot()

    def known_reply(self, key: ReplyKey) -> ConnSnapshot | None:
        return self.replies.get(key)

    @staticmethod
    def replay_reply(known: ConnSnapshot, conn: ServerConnection, relay: BackendRelay) -> None:
        """Leave the state the read left before (the session relays its bytes)."""
        conn.restore(known)
        relay.answered()
