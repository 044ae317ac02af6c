"""The sans-IO state machine: start-up paths, skip-until-Sync, and Hypothesis over sequences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ProtocolViolation, StartupFeatureNotSupported
from proxy.wire import messages as m
from proxy.wire.protocol import (
    ACCEPTS,
    CONNECTION_CLOSED,
    NEED_DATA,
    ConnState,
    MalformedMessage,
    ServerConnection,
)

STARTUP = m.StartupMessage(params=(("user", "u"),))


def ready_conn() -> ServerConnection:
    c = ServerConnection()
    c.receive_data(STARTUP.encode())
    assert c.next_event() == STARTUP
    assert c.state is ConnState.AUTHENTICATING
    c.send(m.AuthenticationOk())
    assert c.state is ConnState.STARTING
    c.send(m.ReadyForQuery(status="I"))
    assert c.state is ConnState.READY
    return c


def feed(c: ServerConnection, *msgs: object) -> list[object]:
    for x in msgs:
        c.receive_data(x.encode())  # type: ignore[attr-defined]
    out = []
    while (ev := c.next_event()) is not NEED_DATA:
        out.append(ev)
        if ev is CONNECTION_CLOSED:
            break
    return out


def feed_raw(c: ServerConnection, *frames: bytes) -> list[object]:
    for f in frames:
        c.receive_data(f)
    out = []
    while (ev := c.next_event()) is not NEED_DATA:
        out.append(ev)
    return out


def test_ssl_then_startup() -> None:
    c = ServerConnection()
    c.receive_data(m.SSLRequest().encode())
    assert c.next_event() == m.SSLRequest()
    assert c.send_ssl_answer(False) == b"N"
    c.receive_data(m.GSSENCRequest().encode())
    assert c.next_event() == m.GSSENCRequest()
    c.receive_data(STARTUP.encode())
    assert c.next_event() == STARTUP


def test_plaintext_buffered_after_ssl_request_disconnects() -> None:
    c = ServerConnection()
    c.receive_data(m.SSLRequest().encode() + STARTUP.encode())
    with pytest.raises(ProtocolViolation) as ei:
        c.next_event()
    assert ei.value.silent and c.state is ConnState.CLOSED


def test_second_ssl_request_refused() -> None:
    c = ServerConnection()
    c.receive_data(m.SSLRequest().encode())
    c.next_event()
    c.receive_data(m.SSLRequest().encode())
    with pytest.raises(ProtocolViolation):
        c.next_event()


def test_cancel_after_ssl_closes() -> None:
    c = ServerConnection()
    c.receive_data(m.SSLRequest().encode())
    c.next_event()
    c.receive_data(m.CancelRequest(pid=1, key=2).encode())
    assert c.next_event() == m.CancelRequest(pid=1, key=2)
    assert c.state is ConnState.CLOSED


def test_protocol_versions() -> None:
    c = ServerConnection()
    c.receive_data(m.StartupMessage(protocol=(3 << 16) | 2, params=(("user", "u"),)).encode())
    c.next_event()
    assert c.negotiation_needed() == (m.PROTOCOL_3_0, ())
    c = ServerConnection()
    c.receive_data(m.StartupMessage(params=(("user", "u"), ("_pq_.x", "1"))).encode())
    c.next_event()
    assert c.negotiation_needed() == (m.PROTOCOL_3_0, ("_pq_.x",))
    c = ServerConnection()
    c.receive_data(m.StartupMessage(protocol=4 << 16, params=()).encode())
    with pytest.raises(StartupFeatureNotSupported, match=r"unsupported frontend protocol 4\.0"):
        c.next_event()


@pytest.mark.parametrize("length", [0, 4, 7, 10_001, 2**31 - 1])
def test_bad_startup_length(length: int) -> None:
    c = ServerConnection()
    c.receive_data(length.to_bytes(4, "big") + b"\x00" * 8)
    with pytest.raises(ProtocolViolation):
        c.next_event()


def test_auth_state_accepts_only_password() -> None:
    c = ServerConnection()
    c.receive_data(STARTUP.encode())
    c.next_event()
    c.receive_data(m.Query(sql="SELECT 1").encode())
    with pytest.raises(ProtocolViolation, match="expected password response"):
        c.next_event()


def test_error_in_extended_batch_skips_until_sync() -> None:
    c = ready_conn()
    assert feed(c, m.Parse(sql="x")) == [m.Parse(sql="x")]
    c.send(m.ErrorResponse(fields=(("S", "ERROR"), ("C", "42601"), ("M", "x"))))
    assert c.state is ConnState.SKIP_UNTIL_SYNC
    got = feed(c, m.Bind(), m.Execute(), m.Query(sql="SELECT 1"), m.Sync(), m.Bind())
    assert got == [m.Sync(), m.Bind()]
    c.send(m.ReadyForQuery(status="I"))
    assert c.state is ConnState.READY


def test_error_for_an_already_synced_batch_does_not_skip() -> None:
    c = ready_conn()
    feed(c, m.Parse(sql="x"), m.Sync(), m.Parse(sql="y"))
    c.send(m.ErrorResponse(fields=(("S", "ERROR"), ("C", "42601"), ("M", "x"))))
    assert c.state is ConnState.READY  # the error belongs to the batch before the Sync
    c.send(m.ReadyForQuery(status="I"))
    assert c.pending_ready == 0


def test_simple_query_error_does_not_skip_and_tracks_status() -> None:
    c = ready_conn()
    feed(c, m.Query(sql="BEGIN"))
    c.send(m.CommandComplete(tag="BEGIN"))
    c.send(m.ReadyForQuery(status="T"))
    assert c.state is ConnState.IN_TRANSACTION
    feed(c, m.Query(sql="bad"))
    c.send(m.ErrorResponse(fields=(("S", "ERROR"), ("C", "42601"), ("M", "x"))))
    c.send(m.ReadyForQuery(status="E"))
    assert c.state is ConnState.FAILED_TRANSACTION


def test_fatal_closes_and_terminate_closes() -> None:
    c = ready_conn()
    c.send(m.ErrorResponse(fields=(("S", "FATAL"), ("V", "FATAL"), ("C", "57P01"), ("M", "x"))))
    assert c.state is ConnState.CLOSED
    c = ready_conn()
    assert feed(c, m.Terminate()) == [m.Terminate(), CONNECTION_CLOSED]
    assert c.state is ConnState.CLOSED


def test_copy_in() -> None:
    c = ready_conn()
    feed(c, m.Query(sql="COPY t FROM STDIN"))
    c.send(m.CopyInResponse(format=0, column_formats=(0,)))
    assert c.state is ConnState.COPY_IN
    assert feed(c, m.CopyData(data=b"1\n"), m.CopyDone()) == [
        m.CopyData(data=b"1\n"),
        m.CopyDone(),
    ]
    assert c.state is ConnState.READY


def test_malformed_content_is_an_event_that_keeps_the_connection() -> None:
    """A message framed well whose body does not read is an event (the session answers it
    with an ERROR, as PostgreSQL does), counted like the message it claims to be."""
    c = ready_conn()
    bind = m.Bind(params=(b"1",)).encode()
    trailing = b"B" + len(bind).to_bytes(4, "big") + bind[5:] + b"x"  # one byte more
    (ev,) = feed_raw(c, trailing)
    assert isinstance(ev, MalformedMessage) and ev.frame == trailing and ev.type_byte == ord("B")
    assert c.state is ConnState.READY and c.batch_open
    (ev,) = feed_raw(c, b"S\x00\x00\x00\x05x")  # a Sync with a body still ends the batch
    assert isinstance(ev, MalformedMessage) and ev.body == b"x"
    assert not c.batch_open and c.pending_ready == 1
    (ev,) = feed_raw(c, b"Q\x00\x00\x00\x05x")  # unterminated
    assert isinstance(ev, MalformedMessage) and ev.frame == b"Q\x00\x00\x00\x05x"
    assert c.pending_ready == 2


def test_skipped_messages_are_discarded_unread() -> None:
    c = ready_conn()
    feed(c, m.Parse(sql="x"))
    c.send(m.ErrorResponse(fields=(("S", "ERROR"), ("C", "42601"), ("M", "x"))))
    assert c.state is ConnState.SKIP_UNTIL_SYNC
    # PostgreSQL does not read what it skips: malformed or not, it is dropped.
    assert feed_raw(c, b"B\x00\x00\x00\x05x", b"D\x00\x00\x00\x04", m.Sync().encode()) == [m.Sync()]
    c.send(m.ReadyForQuery(status="I"))
    feed(c, m.Parse(sql="x"))
    c.send(m.ErrorResponse(fields=(("S", "ERROR"), ("C", "42601"), ("M", "x"))))
    (ev,) = feed_raw(c, b"S\x00\x00\x00\x05x")  # a malformed Sync ends skipping too
    assert isinstance(ev, MalformedMessage) and c.state is ConnState.READY


def test_bad_framing_is_still_fatal() -> None:
    # A Sync over PostgreSQL's small-message limit; a Terminate with a body.
    for frame in (b"S\x00\x00\x40\x00", b"X\x00\x00\x00\x05x"):
        c = ready_conn()
        c.receive_data(frame + b"x" * 20000)
        with pytest.raises(ProtocolViolation):
            c.next_event()
        assert c.state is ConnState.CLOSED


def test_unknown_message_type_is_protocol_violation() -> None:
    c = ready_conn()
    c.receive_data(b"z\x00\x00\x00\x04")
    with pytest.raises(ProtocolViolation, match="invalid frontend message type 122"):
        c.next_event()


def test_eof() -> None:
    c = ready_conn()
    c.receive_data(b"Q\x00\x00")
    c.receive_data(b"")
    assert c.next_event() is CONNECTION_CLOSED


# -- Hypothesis over the transition table ------------------------------------------------------

_frontend = st.sampled_from(
    [
        m.Query(sql="SELECT 1"),
        m.Parse(sql="SELECT 1"),
        m.Bind(),
        m.Describe(kind="P"),
        m.Execute(),
        m.Close(kind="S"),
        m.Sync(),
        m.Flush(),
        m.CopyData(data=b"x"),
        m.CopyDone(),
        m.PasswordMessage(data=b"pw\x00"),
        m.FunctionCall(function_oid=1),
        m.Terminate(),
    ]
)
_backend = st.sampled_from(
    [
        m.AuthenticationOk(),
        m.ReadyForQuery(status="I"),
        m.ReadyForQuery(status="T"),
        m.ReadyForQuery(status="E"),
        m.ErrorResponse(fields=(("S", "ERROR"), ("V", "ERROR"), ("C", "XX000"), ("M", "e"))),
        m.CommandComplete(tag="SELECT 1"),
        m.CopyInResponse(format=0, column_formats=()),
        m.ParseComplete(),
    ]
)
_op = st.one_of(
    st.tuples(st.just("recv"), _frontend),
    st.tuples(st.just("send"), _backend),
    st.tuples(st.just("bytes"), st.binary(max_size=12)),
)


@settings(max_examples=400, deadline=None)
@given(st.booleans(), st.lists(_op, max_size=40))
def test_state_machine_properties(start_ready: bool, ops: list[tuple[str, object]]) -> None:
    c = ready_conn() if start_ready else ServerConnection()
    if not start_ready:
        c.receive_data(STARTUP.encode())
        c.next_event()
    for kind, x in ops:
        before = c.state
        try:
            if kind == "send":
                c.send(x)  # type: ignore[arg-type]
                if isinstance(x, m.ReadyForQuery) and before is not ConnState.CLOSED:
                    assert c.state.value in ("ready", "in-transaction", "failed-transaction")
                    assert c.txn_status == x.status
                continue
            c.receive_data(x.encode() if kind == "recv" else x)  # type: ignore[union-attr,arg-type]
            while True:
                state = c.state
                ev = c.next_event()
                if ev is NEED_DATA or ev is CONNECTION_CLOSED:
                    break
                # Only messages the state accepts come out (malformed or not); in skip mode
                # only Sync/Terminate.
                tb = ev.type_byte if isinstance(ev, MalformedMessage) else ev.TYPE[0]  # type: ignore[union-attr]
                assert tb in ACCEPTS[state]
                if state is ConnState.SKIP_UNTIL_SYNC:
                    assert tb in b"SX"
        except (ProtocolViolation, StartupFeatureNotSupported):
            assert c.state is ConnState.CLOSED
            return
        assert isinstance(c.state, ConnState)
        assert c.pending_ready >= 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_byte_soup_into_receive_data(data: bytes) -> None:
    for start_ready in (False, True):
        c = ready_conn() if start_ready else ServerConnection()
        c.receive_data(data)
        try:
            for _ in range(100):
                ev = c.next_event()
                if ev is NEED_DATA or ev is CONNECTION_CLOSED:
                    break
        except (ProtocolViolation, StartupFeatureNotSupported):
            assert c.state is ConnState.CLOSED
