"""The server side of one PostgreSQL connection, sans-IO (after h11's ``Connection``).

Feed the bytes read from the client to :meth:`ServerConnection.receive_data`, take decoded
frontend messages from :meth:`ServerConnection.next_event`, and turn every backend message into
bytes with :meth:`ServerConnection.send` (or pass relayed frames through :meth:`relay`). The machine
watches both directions and tracks the connection state; it never reads a socket, so it can be
driven by tests and by Hypothesis directly. No asyncio here.

States follow protocol-flow (https://www.postgresql.org/docs/current/protocol-flow.html):

* ``PRE_STARTUP``: untyped start-up packets (SSLRequest, GSSENCRequest, CancelRequest,
  StartupMessage) -- "Start-up".
* ``AUTHENTICATING``: only PasswordMessage/SASL responses ('p').
* ``STARTING``: AuthenticationOk sent, ParameterStatus/BackendKeyData follow, until the first
  ReadyForQuery.
* ``READY`` / ``IN_TRANSACTION`` / ``FAILED_TRANSACTION``: the status byte of the last
  ReadyForQuery sent ('I', 'T', 'E').
* ``SKIP_UNTIL_SYNC``: an ErrorResponse was sent while processing an extended-query message:
  "the backend will ... read and discard messages until a Sync is reached" (protocol-flow,
  "Extended Query").
* ``COPY_IN``: CopyInResponse sent; CopyData/CopyDone/CopyFail flow from the client
  (protocol-flow, "COPY Operations").
* ``CLOSED``: after Terminate, a FATAL error, a CancelRequest or EOF.

Only a bad message type or length is fatal (08P01, the connection closes), as in PostgreSQL's
SocketBackend. A message framed well whose *content* is malformed comes out as a
:class:`MalformedMessage` event and changes the state like the message it claims to be:
PostgreSQL reads content with pq_getmsg* and answers an ERROR, then skips to Sync after an
extended-query message (protocol-flow, "Extended Query"). Messages discarded while skipping are
not decoded at all, as PostgreSQL does not read them.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import NamedTuple

from proxy.errors import ProtocolViolation, StartupFeatureNotSupported
from proxy.wire.messages import (
    DEFAULT_MAX_MESSAGE,
    FRONTEND_EMPTY_TYPES,
    FRONTEND_SMALL_TYPES,
    MAX_STARTUP_PACKET,
    PROTOCOL_3_0,
    BackendMessage,
    CancelRequest,
    FrameBuffer,
    FrontendMessage,
    GSSENCRequest,
    SSLRequest,
    StartupPacket,
    decode_frontend,
    decode_startup_packet,
)


class ConnState(enum.Enum):
    PRE_STARTUP = "pre-startup"
    AUTHENTICATING = "authenticating"
    STARTING = "starting"
    READY = "ready"
    IN_TRANSACTION = "in-transaction"
    FAILED_TRANSACTION = "failed-transaction"
    SKIP_UNTIL_SYNC = "skip-until-sync"
    COPY_IN = "copy-in"
    CLOSED = "closed"

    # Members are singletons: hash by identity (Enum's own __hash__ is Python code, and the
    # state is looked up in a table for every message).
    __hash__ = object.__hash__


IDLE_STATES = frozenset({ConnState.READY, ConnState.IN_TRANSACTION, ConnState.FAILED_TRANSACTION})
_STATUS_STATE = {
    "I": ConnState.READY,
    "T": ConnState.IN_TRANSACTION,
    "E": ConnState.FAILED_TRANSACTION,
}

# Which frontend message types each state accepts (protocol-flow). Anything else is 08P01,
# as in PostgreSQL's SocketBackend ("invalid frontend message type").
_QUERY_TYPES = frozenset(b"QPBDECSHXdcfF")
ACCEPTS: dict[ConnState, frozenset[int]] = {
    ConnState.AUTHENTICATING: frozenset(b"pX"),
    ConnState.STARTING: frozenset(b"X"),
    ConnState.READY: _QUERY_TYPES,
    ConnState.IN_TRANSACTION: _QUERY_TYPES,
    ConnState.FAILED_TRANSACTION: _QUERY_TYPES,
    ConnState.SKIP_UNTIL_SYNC: _QUERY_TYPES,
    ConnState.COPY_IN: _QUERY_TYPES,
    ConnState.CLOSED: frozenset(),
}

# State changes caused by a message, as data: (state, direction + type) -> new state.
# "recv:" = frontend message consumed, "send:" = backend message produced. Transitions
# depending on a value (ReadyForQuery's status, whether an error hits the open batch) are
# resolved in code below; this table holds the unconditional ones.
TRANSITIONS: dict[tuple[ConnState, str], ConnState] = {
    (ConnState.AUTHENTICATING, "send:AuthenticationOk"): ConnState.STARTING,
    (ConnState.SKIP_UNTIL_SYNC, "recv:S"): ConnState.READY,  # refined by the status below
    (ConnState.COPY_IN, "recv:c"): ConnState.READY,  # refined by the status below
    (ConnState.COPY_IN, "recv:f"): ConnState.READY,  # refined by the status below
}
for _s in (*IDLE_STATES, ConnState.SKIP_UNTIL_SYNC, ConnState.COPY_IN, ConnState.STARTING):
    TRANSITIONS[(_s, "recv:X")] = ConnState.CLOSED
for _s in (*IDLE_STATES, ConnState.COPY_IN):
    TRANSITIONS[(_s, "send:CopyInResponse")] = ConnState.COPY_IN
    TRANSITIONS[(_s, "send:CopyBothResponse")] = ConnState.COPY_IN
for _s in ConnState:
    TRANSITIONS[(_s, "send:FatalError")] = ConnState.CLOSED
# Decoded messages remembered per connection: which types, up to which frame size, how many.
_MEMO_TYPES = frozenset(b"QPBDEC")
_MEMO_FRAME = 512
_MEMO_SIZE = 256
# The "recv:" rows keyed by the type byte, for the per-message lookup.
_ON_RECV = {(s, ord(k[5])): v for (s, k), v in TRANSITIONS.items() if k.startswith("recv:")}

_EXTENDED_TYPES = frozenset(b"PBDECH")
# The types whose content PostgreSQL reads field by field, answering an ERROR (not FATAL) when
# it is malformed: every type the query states accept except Terminate (closes) and CopyData
# (no structure).
_CONTENT_CHECKED = frozenset(b"QPBDECSHFcf")
# Members read for every message, as module constants (an Enum member lookup costs more).
_CLOSED, _PRE_STARTUP, _READY = ConnState.CLOSED, ConnState.PRE_STARTUP, ConnState.READY
_SKIP_UNTIL_SYNC = ConnState.SKIP_UNTIL_SYNC


@dataclass(frozen=True, slots=True)
class NeedData:
    """``next_event`` has nothing complete yet: read more bytes."""


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The client closed its end (EOF) or the connection is closed."""


@dataclass(frozen=True, slots=True)
class MalformedMessage:
    """A frontend message of an accepted type, framed well, whose body the strict decoder
    refuses (``reason``): the session answers it as PostgreSQL would (an ERROR, the session
    kept; see :mod:`proxy.wire.messages`, "Message content read as PostgreSQL reads it")."""

    frame: bytes  # as it came: type byte, length, body
    reason: str

    @property
    def type_byte(self) -> int:
        return self.frame[0]

    @property
    def body(self) -> bytes:
        return self.frame[5:]


NEED_DATA = NeedData()
CONNECTION_CLOSED = ConnectionClosed()

Event = FrontendMessage | StartupPacket | NeedData | ConnectionClosed | MalformedMessage


class ConnSnapshot(NamedTuple):
    """The connection's state as a value (:meth:`ServerConnection.snapshot`): what the
    replay caches of the session (:mod:`proxy.wire.replay`) key by and restore. A tuple, so
    it hashes at C speed: it is taken for every remembered read."""

    state: ConnState
    txn_status: str
    pending_ready: int
    batch_open: bool


class ServerConnection:
    """State machine for the server side of one client connection."""

    def __init__(self, *, max_message: int = DEFAULT_MAX_MESSAGE) -> None:
        self.state = ConnState.PRE_STARTUP
        # The backend's transaction status ('I', 'T', 'E'), the one copy of it: from the last
        # ReadyForQuery sent or relayed, or reported by the backend to a hidden request
        # (backend_status). What the connection becomes at the end of a batch.
        self.txn_status: str = "I"
        self._frames = FrameBuffer(
            max_message=max_message,
            small_types=FRONTEND_SMALL_TYPES,
            empty_types=FRONTEND_EMPTY_TYPES,
        )
        self._eof = False
        self._ssl_done = False
        self._gss_done = False
        # Sync and Query messages received minus ReadyForQuery sent: an error sent while this
        # is zero belongs to the batch still open (after the last Sync), so it starts skipping.
        self.pending_ready = 0
        # An extended-query message was received since the last Sync/Query.
        self.batch_open = False
        # What negotiation_needed answers, from the StartupMessage (which is not kept: the
        # login has it, and its strings would stay for the connection's life).
        self._negotiation: tuple[int, tuple[str, ...]] | None = None
        # The frame (type byte, length, body) of the message next_event returned last, so a
        # relayed message goes upstream exactly as the client sent it.
        self.last_frame = b""
        # Messages this client sent before, by their frame: clients repeat the same Bind,
        # Execute, Describe, Parse... for every execution of a statement, and messages are
        # frozen values. Per connection, so no session can time another's messages.
        self._decoded: dict[bytes, FrontendMessage] = {}

    # -- input ---------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Add bytes read from the client; ``b""`` means EOF."""
        if data:
            self._frames.feed(data)
        else:
            self._eof = True

    @property
    def buffered(self) -> int:
        return len(self._frames)

    @property
    def heard(self) -> bool:
        """Whether the client has sent anything yet (admission: a silent login goes first)."""
        return (
            bool(self._frames)
            or self._ssl_done
            or self._gss_done
            or (self.state is not ConnState.PRE_STARTUP)
        )

    def next_event(self) -> Event:
        """The next complete frontend message, NEED_DATA, or CONNECTION_CLOSED.

        Raises ProtocolViolation (08P01) or StartupFeatureNotSupported (0A000) on bad input;
        after that the connection is closed.
        """
        try:
            while True:
                state = self.state
                if state is _CLOSED:
                    return CONNECTION_CLOSED
                if state is _PRE_STARTUP:
                    return self._startup_event()
                frame = self._frames.next_raw()
                if frame is None:
                    return CONNECTION_CLOSED if self._eof else NEED_DATA
                tb = frame[0]
                if tb not in ACCEPTS[state]:
                    if state is ConnState.AUTHENTICATING:
                        raise ProtocolViolation(
                            f"expected password response, got message type {tb}"
                        )
                    raise ProtocolViolation(f"invalid frontend message type {tb}")
                if state is _SKIP_UNTIL_SYNC and tb not in b"SX":
                    continue  # discarded unread, protocol-flow "Extended Query"
                msg: FrontendMessage | MalformedMessage | None = self._decoded.get(frame)
                if msg is None:
                    try:
                        msg = decode_frontend(frame[:1], frame[5:])
                    except ProtocolViolation as e:
                        if tb not in _CONTENT_CHECKED:
                            raise
                        msg = MalformedMessage(frame, e.message)
                    else:
                        if len(frame) <= _MEMO_FRAME and tb in _MEMO_TYPES:
                            if len(self._decoded) >= _MEMO_SIZE:
                                self._decoded.clear()
                            self._decoded[frame] = msg
                self.last_frame = frame
                # the state change a received message makes
                if tb in _EXTENDED_TYPES:
                    self.batch_open = True
                elif tb in b"SQF":
                    self.pending_ready += 1
                    self.batch_open = False
                new = _ON_RECV.get((state, tb))
                if new is not None:
                    self.state = _STATUS_STATE[self.txn_status] if new is _READY else new
                return msg
        except (ProtocolViolation, StartupFeatureNotSupported):
            self.state = ConnState.CLOSED
            raise

    def _startup_event(self) -> Event:
        if len(self._frames) < 4:
            if self._eof:
                return CONNECTION_CLOSED
            return NEED_DATA
        (length,) = struct.unpack("!i", self._frames.peek(4))
        if length < 8 or length > MAX_STARTUP_PACKET:
            raise ProtocolViolation("invalid length of startup packet", silent=True)
        if len(self._frames) < length:
            return CONNECTION_CLOSED if self._eof else NEED_DATA
        packet = self._frames.take(length)
        msg = decode_startup_packet(packet[4:])
        if isinstance(msg, SSLRequest | GSSENCRequest):
            which = "SSL" if isinstance(msg, SSLRequest) else "GSSENC"
            done = self._ssl_done if which == "SSL" else self._gss_done
            if done:
                raise ProtocolViolation(f"duplicate {which}Request")
            if len(self._frames):
                # Bytes sent before our answer could be read as plaintext injected ahead of
                # the TLS handshake (CVE-2021-23222); PgBouncer and PostgreSQL disconnect.
                raise ProtocolViolation(
                    f"received unencrypted data after {which} request", silent=True
                )
            if which == "SSL":
                self._ssl_done = True
            else:
                self._gss_done = True
            return msg
        if isinstance(msg, CancelRequest):
            self.state = ConnState.CLOSED
            return msg
        if msg.major != 3:
            raise StartupFeatureNotSupported(
                f"unsupported frontend protocol {msg.major}.{msg.minor}: server supports 3.0 to 3.0"
            )
        opts = tuple(k for k, _ in msg.params if k.startswith("_pq_."))
        if msg.minor > 0 or opts:
            self._negotiation = (PROTOCOL_3_0, opts)
        self.state = ConnState.AUTHENTICATING
        return msg

    def negotiation_needed(self) -> tuple[int, tuple[str, ...]] | None:
        """(newest version, unrecognised ``_pq_.`` options) if a NegotiateProtocolVersion is
        due: the client asked for 3.x with x > 0 or sent protocol options (protocol-flow,
        "Protocol versions"); None otherwise. Like PostgreSQL (ProcessStartupPacket sends
        PG_PROTOCOL(3, 0)), the version goes out as major << 16 | minor, i.e. 0x00030000."""
        return self._negotiation

    # -- output --------------------------------------------------------------------------

    def send(self, msg: BackendMessage) -> bytes:
        """Encode a backend message and advance the state accordingly."""
        data = msg.encode()
        self._observe(msg.TYPE[0], data)
        return data

    def relay(self, frame: bytes) -> bytes:
        """A backend frame passed through as it is (type byte, length, body); only the type
        and, for ReadyForQuery and ErrorResponse, one field are looked at."""
        if frame[0] in _OBSERVED:
            self._observe(frame[0], frame)
        return frame

    def send_ssl_answer(self, accept: bool) -> bytes:
        """The one-byte answer to SSLRequest/GSSENCRequest ('S' or 'N', protocol-flow SSL)."""
        return b"S" if accept else b"N"

    def _observe(self, tb: int, data: bytes) -> None:
        if self.state is _CLOSED:
            return
        if tb == _R and data[5:9] == b"\x00\x00\x00\x00":
            new = TRANSITIONS.get((self.state, "send:AuthenticationOk"))
            if new is not None:
                self.state = new
            return
        if tb == _Z:
            status = chr(data[5])
            self.txn_status = status if status in _STATUS_STATE else "I"
            if self.pending_ready > 0:
                self.pending_ready -= 1
            self.state = _STATUS_STATE[self.txn_status]
            return
        if tb == _E:
            if _is_fatal(data):
                self.state = TRANSITIONS[(self.state, "send:FatalError")]
                return
            if self.state is ConnState.COPY_IN:
                self.state = _STATUS_STATE[self.txn_status]
            if self.state in IDLE_STATES and self.pending_ready == 0 and self.batch_open:
                self.state = ConnState.SKIP_UNTIL_SYNC
            return
        if tb == _G:
            self.state = TRANSITIONS.get((self.state, "send:CopyInResponse"), self.state)
        elif tb == _W:
            self.state = TRANSITIONS.get((self.state, "send:CopyBothResponse"), self.state)

    def enter_skip(self) -> None:
        """The session learnt that the backend skips the rest of the open batch (an error for
        a relayed extended message, no Sync forwarded yet): discard until Sync here too."""
        if self.state in IDLE_STATES:
            self.state = ConnState.SKIP_UNTIL_SYNC

    def close(self) -> None:
        self.state = ConnState.CLOSED

    def forget_frame(self) -> None:
        """Let go of the last message's frame (a big one is not kept while the session
        waits for the next)."""
        self.last_frame = b""

    def backend_status(self, status: str) -> None:
        """The backend's ReadyForQuery said ``status``, also for a request the client never
        sees (a hidden BEGIN, a check): the transaction status the next ReadyForQuery sent
        carries, and the state the end of a batch returns to."""
        self.txn_status = status if status in _STATUS_STATE else "I"

    def ready_skipped(self) -> None:
        """A Query or FunctionCall received gets no ReadyForQuery: it came inside an extended
        batch that failed (protocol-flow "Extended Query": the backend discards it)."""
        if self.pending_ready > 0:
            self.pending_ready -= 1

    def snapshot(self) -> ConnSnapshot:
        """The state as a value, for :meth:`restore`."""
        # (tuple.__new__: half the cost of the NamedTuple's own __new__; taken per read)
        state = (self.state, self.txn_status, self.pending_ready, self.batch_open)
        return _new_tuple(ConnSnapshot, state)

    def restore(self, snapshot: ConnSnapshot) -> None:
        """Put the connection where a snapshot found it: a replay cache relayed a read whose
        full handling was seen to leave this state (:mod:`proxy.wire.replay`)."""
        self.state, self.txn_status, self.pending_ready, self.batch_open = snapshot


_new_tuple = tuple.__new__

# The backend message types that change the connection's state; the rest pass unobserved.
_R, _Z, _E, _G, _W = b"RZEGW"
_OBSERVED = frozenset(b"RZEGW")


def _is_fatal(data: bytes) -> bool:
    # The S field comes first in every server's ErrorResponse; look for it anywhere.
    body = data[5:]
    for sev in (b"SFATAL\x00", b"SPANIC\x00", b"VFATAL\x00", b"VPANIC\x00"):
        if body.startswith(sev) or b"\x00" + sev in body:
            return True
    return False
