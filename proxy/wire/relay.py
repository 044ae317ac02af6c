"""The server side of a session: tracking the backend's replies, sans-IO.

Every client message the session forwards to the backend is recorded as an *expectation*
(:class:`Expect`, :meth:`BackendRelay.forward`): a reply the backend owes. Each frame the backend
sends (:meth:`BackendRelay.feed`) is relayed to the client as it came (no re-encoding), kept for
a hidden request the proxy made itself, or used to track the expectations, the transaction
status and COPY; the frame that completes an expectation (protocol-flow: ParseComplete for a
Parse, ReadyForQuery for a Sync ...) retires it.

Errors follow protocol-flow "Extended Query": after an ErrorResponse the backend skips to Sync;
the relay drops the expectations of skipped messages (calling their ``on_fail``), and when no
Sync of the client's is on its way upstream it puts the client-side state machine into
skip-until-Sync too (:meth:`proxy.wire.protocol.ServerConnection.enter_skip`), which then
discards what the client sends before its Sync.

No sockets, no asyncio: the relay is fed frames and appends what goes to the client to the
session's output buffer (through the connection state machine, which watches it) and what
goes to the backend to :attr:`BackendRelay.outgoing`; the session writes both.

>>> from proxy.wire.local import LocalObjects
>>> from proxy.wire.messages import Parse, ParseComplete
>>> out = bytearray()
>>> relay = BackendRelay(
...     ServerConnection(), out, LocalObjects(), on_busy=lambda: None, on_idle=lambda: None
... )
>>> e = relay.forward(Parse(name="s", sql="SELECT 1").encode(), Kind.PARSE)
>>> relay.outgoing == Parse(name="s", sql="SELECT 1").encode(), len(relay.pending)
(True, 1)
>>> relay.feed([ParseComplete().encode()])
>>> out == ParseComplete().encode(), len(relay.pending)
(True, 0)
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from proxy.wire.local import LocalObjects
from proxy.wire.messages import BackendMessage, Flush, ParameterStatus, decode_backend
from proxy.wire.protocol import ConnState, ServerConnection

log = logging.getLogger("lapras.proxy.session")


class SessionClosed(Exception):
    """The session must end (client gone, upstream gone, FATAL sent)."""


class Kind(enum.Enum):
    PARSE = "P"
    BIND = "B"
    DESCRIBE_S = "DS"
    DESCRIBE_P = "DP"
    EXECUTE = "E"
    CLOSE = "C"
    SYNC = "S"
    QUERY = "Q"
    FUNCTION = "F"
    FLUSH = "H"  # only a malformed Flush is forwarded as an expectation: it gets an error

    __hash__ = object.__hash__  # identity: members are singletons (see ConnState)


EXTENDED_KINDS = frozenset(
    {
        Kind.PARSE,
        Kind.BIND,
        Kind.DESCRIBE_S,
        Kind.DESCRIBE_P,
        Kind.EXECUTE,
        Kind.CLOSE,
        Kind.FLUSH,
    }
)
_READY_KINDS = frozenset({Kind.QUERY, Kind.SYNC, Kind.FUNCTION})
# The backend message type that completes each expectation (protocol-flow).
_COMPLETES: dict[Kind, frozenset[int]] = {
    Kind.PARSE: frozenset(b"1"),
    Kind.BIND: frozenset(b"2"),
    Kind.CLOSE: frozenset(b"3"),
    Kind.DESCRIBE_S: frozenset(b"Tn"),
    Kind.DESCRIBE_P: frozenset(b"Tn"),
    Kind.EXECUTE: frozenset(b"CIs"),
    Kind.SYNC: frozenset(b"Z"),
    Kind.QUERY: frozenset(b"Z"),
    Kind.FUNCTION: frozenset(b"Z"),
    Kind.FLUSH: frozenset(),  # never completed: answered by the error that ends it
}

_C, _E, _S, _Z = b"CESZ"
# Backend message types that need more than relaying: asynchronous ones, errors, the end
# of a request, COPY, authentication (the connection state watches Z, E, G, W and R).
TRACKED = frozenset(b"NSAEZGWR")
_TRACKED_TAGS = TRACKED | frozenset(b"C")  # and CommandComplete (LocalObjects.watching)
_SKIP_UNTIL_SYNC = ConnState.SKIP_UNTIL_SYNC  # read for every relayed message
_FLUSH = Flush().encode()
_NO_PARAMETERS: Mapping[str, str] = MappingProxyType({})


@dataclass(slots=True)
class Expect:
    """A reply the backend owes for one forwarded message."""

    kind: Kind
    forward: bool = True  # relay the replies to the client (False: hidden message)
    forward_ready: bool = True  # relay the closing ReadyForQuery (Query/Sync)
    sink: list[BackendMessage] | None = None  # collect hidden replies here
    on_fail: Callable[[], None] | None = None  # the message failed or was skipped
    on_error: Callable[[], None] | None = None  # the backend answered it with an error
    show_error: bool = False  # a hidden message whose error is the client's to see
    pool: bool = False  # the pooler's reset (proxy.wire.pool): nothing of the client's ends
    failed: bool = False


class RelaySnapshot(NamedTuple):
    """The relay's state as a value (:meth:`BackendRelay.snapshot`), for the replay caches
    (:mod:`proxy.wire.replay`): the kinds of the plain expectations owed, and the batch."""

    kinds: tuple[Kind, ...]
    upstream_open: bool
    need_flush: bool


class BackendRelay:
    """The backend's side of one session: what it owes, and what its replies change.

    ``out`` is the session's buffer of bytes for the client; ``local`` the cursors answered
    here, which watch how the backend's transaction ends; ``on_busy`` is called when the
    backend comes to owe something (nothing was pending), ``on_idle`` when it reports no
    transaction open (ReadyForQuery 'I': the portals answered here end).
    """

    def __init__(
        self,
        conn: ServerConnection,
        out: bytearray,
        local: LocalObjects,
        *,
        on_busy: Callable[[], None],
        on_idle: Callable[[], None],
    ) -> None:
        self.conn = conn
        self.out = out
        self.local = local
        self.on_busy = on_busy
        self.on_idle = on_idle
        # owed, oldest first (a list: short, and a deque's block is 760 bytes per session)
        self.pending: list[Expect] = []
        self.outgoing = bytearray()  # for the backend, written by the session in one go
        # the backend's ParameterStatus values as the client was sent them: from login the
        # connection's own (shared, a read-only view: :meth:`welcome`) until one changes (a
        # dict of the session's own)
        self.params: Mapping[str, str] = _NO_PARAMETERS
        self.upstream_open = False  # extended messages sent upstream since the last Sync
        self.need_flush = False  # ... and no Flush or Sync after them
        self.copy_in = False  # the backend is in COPY FROM STDIN
        # CommandComplete tags (b"" for an ErrorResponse), kept while not None
        self.tags: list[bytes] | None = None
        self.closed = False  # the backend connection is gone: nothing more is forwarded
        self.pid = 0  # the session's, for the log

    # ------------------------------------------------------------ client -> backend

    def forward(
        self,
        data: bytes,
        kind: Kind,
        *,
        forward: bool = True,
        forward_ready: bool = True,
        sink: list[BackendMessage] | None = None,
        on_fail: Callable[[], None] | None = None,
        on_error: Callable[[], None] | None = None,
        show_error: bool = False,
    ) -> Expect:
        """Send ``data`` (one message of ``kind``, or several answered as one) upstream and
        expect its reply; ``forward`` False: a hidden request, its replies kept in ``sink``."""
        if self.conn.state is _SKIP_UNTIL_SYNC and forward and kind is not Kind.SYNC:
            # An error arrived while this client message was being routed: the backend would
            # skip it, and so do we (no expectation, nothing sent).
            if kind is Kind.QUERY or kind is Kind.FUNCTION:
                self.conn.ready_skipped()
            return Expect(kind, failed=True)
        if self.closed:
            raise SessionClosed
        self.outgoing += data  # (send, inline: once per relayed message)
        if kind in EXTENDED_KINDS:
            self.upstream_open = True
            self.need_flush = True
        else:
            self.need_flush = False
        e = Expect(kind, forward, forward_ready, sink, on_fail, on_error, show_error=show_error)
        if not self.pending:
            self.on_busy()
        self.pending.append(e)
        return e

    def forward_sync(self, data: bytes) -> None:
        """The client's Sync (with a body or not): it ends the batch open upstream (a Sync
        with a body too: the backend stops skipping, answers ERROR "invalid message format",
        then ReadyForQuery with its own status)."""
        self.forward(data, Kind.SYNC)
        self.upstream_open = False

    def prepend(self, data: bytes, expects: list[Expect]) -> None:
        """Requests that go before everything still to be sent, when nothing was sent yet to
        the backend connection just taken (the pooler's reset, :mod:`proxy.wire.pool`)."""
        if not self.pending and expects:
            self.on_busy()
        self.outgoing[:0] = data
        self.pending[:0] = expects

    def expect(self, e: Expect) -> Expect:
        """Expect the reply of a message sent with an earlier :meth:`forward`."""
        if not self.pending:
            self.on_busy()
        self.pending.append(e)
        return e

    def send(self, data: bytes) -> None:
        """Bytes for the backend that owe no reply of their own (COPY data)."""
        if self.closed:
            raise SessionClosed
        self.outgoing += data

    def close(self) -> None:
        """The backend connection is gone, or the session closes it: nothing more is sent."""
        self.closed = True

    def copy_message(self, frame: bytes, *, end: bool) -> None:
        """CopyData, CopyDone or CopyFail (``end``) from the client: relayed while the
        backend is in COPY FROM STDIN; else ignored, as PostgreSQL ignores stray copy
        messages (postgres.c, 'c'/'d'/'f')."""
        if self.copy_in:
            if end:
                self.copy_in = False
            self.send(frame)

    def flush(self) -> None:
        """Ask the backend for what it holds back until a Flush or Sync (protocol-flow)."""
        if self.need_flush:
            self.send(_FLUSH)
            self.need_flush = False

    # ------------------------------------------------------------ backend -> client

    def feed(self, frames: list[bytes]) -> None:
        """The frames of one backend read (type byte, length, body each), in order."""
        pending, out = self.pending, self.out
        # while a cursor made here depends on how the transaction ends, command tags too
        tracked = _TRACKED_TAGS if self.local.watching or self.tags is not None else TRACKED
        for frame in frames:
            tb = frame[0]
            if pending and tb not in tracked and pending[0].forward:
                # The common case, inline: a reply to relay as it came (rows,
                # completions, descriptions), maybe completing its expectation.
                out += frame
                if tb in _COMPLETES[pending[0].kind]:
                    pending.pop(0)
                continue
            self._frame(frame)

    def snapshot(self) -> RelaySnapshot:
        """The state as a value, for :meth:`restore` (only plain expectations are kept:
        relayed, without a sink or an ``on_fail``)."""
        return RelaySnapshot(
            tuple(e.kind for e in self.pending), self.upstream_open, self.need_flush
        )

    def restore(self, snapshot: RelaySnapshot) -> None:
        """Owe what a snapshot owed: a replay cache relayed a read whose full handling was
        seen to leave this state (:mod:`proxy.wire.replay`)."""
        self.pending.clear()
        self.pending.extend(Expect(kind) for kind in snapshot.kinds)
        if self.pending:
            self.on_busy()
        self.upstream_open, self.need_flush = snapshot.upstream_open, snapshot.need_flush

    def answered(self) -> None:
        """A backend read answered every expectation (a replay cache relayed it whole,
        :mod:`proxy.wire.replay`): nothing is owed, no batch is open upstream."""
        self.pending.clear()
        self.upstream_open = False

    def _relay(self, frame: bytes) -> None:
        self.out += self.conn.relay(frame)

    def _skip_to_sync(self) -> None:
        """The backend skips everything up to the next Sync (protocol-flow "Extended Query"):
        the replies of those messages never come."""
        while self.pending and self.pending[0].kind is not Kind.SYNC:
            s = self.pending.pop(0)
            s.failed = True
            if s.on_fail:
                s.on_fail()

    def welcome(self, params: Mapping[str, str]) -> None:
        """The parameters the backend reported at login (the client is sent them)."""
        self.params = params

    def _report(self, ps: ParameterStatus) -> None:
        own = self.params
        if not isinstance(own, dict):  # still the connection's: copied first
            own = self.params = dict(own)
        own[ps.name] = ps.value

    def _frame(self, frame: bytes) -> None:
        """One backend frame that needs more than relaying: relayed, kept for a hidden
        request or used to track the expectations and the transaction status."""
        tb = frame[0]
        e = self.pending[0] if self.pending else None
        if tb in b"NSA":  # asynchronous: NoticeResponse, ParameterStatus, Notification
            if tb == _S:
                ps = _decode(frame)
                assert isinstance(ps, ParameterStatus)
                self._report(ps)
                self._relay(frame)
            elif e is not None and not e.forward:
                if e.sink is not None:
                    e.sink.append(_decode(frame))
            else:
                self._relay(frame)
            return
        if e is None:
            # Unsolicited (e.g. FATAL from pg_terminate_backend): pass it on.
            self._relay(frame)
            return
        if tb == _E:
            e.failed = True
            if self.tags is not None:
                self.tags.append(b"")
            if e.on_error is not None:
                e.on_error()
            if e.forward or e.show_error:
                self._relay(frame)
            elif e.sink is not None:
                e.sink.append(_decode(frame))
            if e.kind in EXTENDED_KINDS:
                # The backend now skips to Sync: the replies of skipped messages never come.
                self.pending.pop(0)
                if e.on_fail:
                    e.on_fail()
                self._skip_to_sync()
                if (e.forward or e.show_error) and not self.pending:
                    # No Sync of the client's is on its way upstream: the rest of the
                    # client's batch must be discarded too.
                    self.conn.enter_skip()
            return
        if tb == _Z:
            conn = self.conn
            before = conn.txn_status
            conn.backend_status(frame[5:6].decode("latin-1"))
            if self.local.watching:
                self.local.saw_status(before, conn.txn_status)
            if e.kind not in _READY_KINDS:
                # Messages the backend skipped without our knowing: resynchronise on Sync.
                self._skip_to_sync()
                e = self.pending[0] if self.pending else e
            if e.kind in _READY_KINDS and self.pending and self.pending[0] is e:
                self.pending.pop(0)
                if e.forward and e.forward_ready:
                    self._relay(frame)
            else:
                log.warning("session %d: unexpected ReadyForQuery from upstream", self.pid)
                self._relay(frame)
            if not self.pending:
                self.upstream_open = False
            if conn.txn_status == "I" and not e.pool:
                self.on_idle()
            return
        if tb in b"GW":
            self.copy_in = True
        elif tb == _C:
            if self.local.watching:
                self.local.saw_tag(frame[5:-1])
            if self.tags is not None:
                self.tags.append(frame[5:-1])
        if e.forward:
            self._relay(frame)
        elif e.sink is not None:
            e.sink.append(_decode(frame))
        if tb in _COMPLETES[e.kind]:
            self.pending.pop(0)


def _decode(frame: bytes) -> BackendMessage:
    return decode_backend(frame[:1], frame[5:])
