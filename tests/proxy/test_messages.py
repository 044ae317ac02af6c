"""The codec: a round trip per message, bounds, and byte soup that only raises 08P01."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ProtocolViolation
from proxy.wire import messages as m

FRONTEND = [
    m.Query(sql="SELECT 1"),
    m.Parse(name="s1", sql="SELECT $1, $2", param_oids=(23, 0)),
    m.Parse(sql="SELECT 1"),
    m.Bind(
        portal="p",
        statement="s1",
        param_formats=(1, 0),
        params=(b"\x00\x00\x00\x01", None),
        result_formats=(1,),
    ),
    m.Bind(),
    m.Describe(kind="S", name="s1"),
    m.Describe(kind="P"),
    m.Execute(portal="p", max_rows=10),
    m.Close(kind="S", name="s1"),
    m.Close(kind="P", name=""),
    m.Sync(),
    m.Flush(),
    m.Terminate(),
    m.PasswordMessage(data=b"secret\x00"),
    m.CopyData(data=b"1\t2\n"),
    m.CopyDone(),
    m.CopyFail(message="nope"),
    m.FunctionCall(function_oid=1598, arg_formats=(1,), args=(b"\x00", None), result_format=1),
]

BACKEND = [
    m.AuthenticationOk(),
    m.AuthenticationCleartextPassword(),
    m.AuthenticationMD5Password(salt=b"abcd"),
    m.AuthenticationSASL(mechanisms=("SCRAM-SHA-256",)),
    m.AuthenticationSASLContinue(data=b"r=x,s=y,i=4096"),
    m.AuthenticationSASLFinal(data=b"v=abc"),
    m.AuthenticationOther(code=7, data=b""),
    m.ParameterStatus(name="server_version", value="16.4"),
    m.BackendKeyData(pid=123, key=0xFFFFFFFF),
    m.ReadyForQuery(status="I"),
    m.ReadyForQuery(status="T"),
    m.ReadyForQuery(status="E"),
    m.RowDescription(
        fields=(
            m.FieldDescription(
                name="count", type_oid=20, type_size=8, table_oid=16389, column_attr=4, format=1
            ),
            m.FieldDescription(name="n", type_oid=1700, type_size=-1, type_modifier=655366),
        )
    ),
    m.DataRow(values=(b"1", None, b"")),
    m.CommandComplete(tag="SELECT 1"),
    m.EmptyQueryResponse(),
    m.ErrorResponse(fields=(("S", "ERROR"), ("V", "ERROR"), ("C", "42501"), ("M", "no"))),
    m.NoticeResponse(fields=(("S", "NOTICE"), ("C", "00000"), ("M", "hi"))),
    m.ParseComplete(),
    m.BindComplete(),
    m.CloseComplete(),
    m.NoData(),
    m.PortalSuspended(),
    m.ParameterDescription(oids=(23, 25, 4294967295)),
    m.NegotiateProtocolVersion(newest_minor=0, unrecognized=("_pq_.x",)),
    m.CopyInResponse(format=0, column_formats=(0, 0)),
    m.CopyOutResponse(format=1, column_formats=(1,)),
    m.CopyBothResponse(format=0, column_formats=()),
    m.NotificationResponse(pid=5, channel="ch", payload="p"),
    m.FunctionCallResponse(value=b"x"),
    m.FunctionCallResponse(value=None),
    m.CopyData(data=b"x"),
    m.CopyDone(),
]


def _split(data: bytes) -> tuple[bytes, bytes]:
    (length,) = struct.unpack("!i", data[1:5])
    assert length == len(data) - 1
    return data[:1], data[5:]


@pytest.mark.parametrize("msg", FRONTEND, ids=lambda x: type(x).__name__)
def test_frontend_round_trip(msg: m.FrontendMessage) -> None:
    t, body = _split(msg.encode())
    assert m.decode_frontend(t, body) == msg


@pytest.mark.parametrize("msg", BACKEND, ids=lambda x: type(x).__name__)
def test_backend_round_trip(msg: m.BackendMessage) -> None:
    t, body = _split(msg.encode())
    assert m.decode_backend(t, body) == msg


@pytest.mark.parametrize(
    "msg",
    [
        m.StartupMessage(params=(("user", "u"), ("database", "d"))),
        m.SSLRequest(),
        m.GSSENCRequest(),
        m.CancelRequest(pid=7, key=0x80000001),
    ],
    ids=lambda x: type(x).__name__,
)
def test_startup_round_trip(msg: m.StartupPacket) -> None:
    data = msg.encode()
    assert struct.unpack("!i", data[:4])[0] == len(data)
    assert m.decode_startup_packet(data[4:]) == msg


def test_backend_key_data_is_12_bytes() -> None:
    assert len(m.BackendKeyData(pid=1, key=2).encode()) == 13  # type byte + 12


def test_bind_param_format_rules() -> None:
    assert m.Bind(params=(b"1", b"2")).param_format(1) == 0
    assert m.Bind(param_formats=(1,), params=(b"1", b"2")).param_format(1) == 1
    b = m.Bind(param_formats=(0, 1), params=(b"1", b"2"))
    assert (b.param_format(0), b.param_format(1)) == (0, 1)


@pytest.mark.parametrize(
    ("t", "body"),
    [
        (b"Q", b"no terminator"),
        (b"P", b"a\x00b\x00\x00\x05"),  # count says 5 oids, none follow
        (b"B", b"\x00\x00\x00\x01\x00\x02\x00\x01\x7f\xff\xff\xff"),  # value longer than body
        (b"B", b"\x00\x00\xff\xff"),  # negative count
        (b"B", b"\x00\x00\x00\x01\x00\x05"),  # format code 5
        (b"D", b"X\x00"),
        (b"E", b"\x00\x00\x00"),
        (b"S", b"extra"),
        (b"z", b""),
        (b"Q", b"\xff\xfe\x00"),  # invalid UTF-8
    ],
)
def test_malformed_is_protocol_violation(t: bytes, body: bytes) -> None:
    with pytest.raises(ProtocolViolation):
        m.decode_frontend(t, body)


def test_frame_bounds() -> None:
    fb = m.FrameBuffer(max_message=100, small_types=frozenset(b"S"), empty_types=frozenset(b"S"))
    fb.feed(b"Q" + struct.pack("!i", 101))
    with pytest.raises(ProtocolViolation):
        fb.next_frame()
    fb = m.FrameBuffer(empty_types=frozenset(b"S"))
    fb.feed(b"S" + struct.pack("!i", 5) + b"x")
    with pytest.raises(ProtocolViolation):
        fb.next_frame()
    fb = m.FrameBuffer()
    fb.feed(b"Q" + struct.pack("!i", 3))
    with pytest.raises(ProtocolViolation):
        fb.next_frame()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=1), st.binary(max_size=200))
def test_byte_soup_frontend_only_protocol_violation(t: bytes, body: bytes) -> None:
    with contextlib.suppress(ProtocolViolation):
        m.decode_frontend(t, body)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted({bytes([b]) for b in b"RSKZTDCIEN123nstvGHWAVdc"})),
    st.binary(max_size=200),
)
def test_byte_soup_backend_only_protocol_violation(t: bytes, body: bytes) -> None:
    with contextlib.suppress(ProtocolViolation):
        m.decode_backend(t, body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_byte_soup_startup_only_protocol_violation(body: bytes) -> None:
    with contextlib.suppress(ProtocolViolation):
        m.decode_startup_packet(body)


def _reference_decode(t: bytes, body: bytes) -> object:
    """The _Reader-based decoder every frontend type has (decode_frontend's fast paths for
    Bind/Execute/Describe/Close must agree with it exactly)."""
    try:
        return m._FRONTEND[t](m._Reader(body, t.decode()))
    except ProtocolViolation as e:
        return ("08P01", str(e))


def _decoded(t: bytes, body: bytes) -> object:
    try:
        return m.decode_frontend(t, body)
    except ProtocolViolation as e:
        return ("08P01", str(e))


_name = st.text(max_size=4).filter(lambda x: "\x00" not in x).map(lambda x: x.encode() + b"\x00")
_codes = st.lists(st.integers(-1, 2), max_size=3)


@st.composite
def _bodies(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A (type, body) of Bind / Execute / Describe / Close, laid out field by field with
    values the decoder must refuse among the valid ones (format codes -1 and 2, as many or
    fewer formats than parameters, negative row limits, other subtypes)."""
    t = draw(st.sampled_from([b"B", b"E", b"D", b"C"]))
    if t == b"B":
        pf = draw(_codes)
        params = draw(st.lists(st.none() | st.binary(max_size=3), max_size=3))
        rf = draw(_codes)
        body = draw(_name) + draw(_name) + struct.pack(f"!h{len(pf)}h", len(pf), *pf)
        body += struct.pack("!h", len(params))
        for v in params:
            body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
        body += struct.pack(f"!h{len(rf)}h", len(rf), *rf)
    elif t == b"E":
        body = draw(_name) + struct.pack("!i", draw(st.integers(-(2**31), 2**31 - 1)))
    else:
        body = draw(st.sampled_from([b"S", b"P", b"X"])) + draw(_name)
    return t, body


@settings(max_examples=600, deadline=None)
@given(
    _bodies(),
    st.lists(st.tuples(st.integers(0, 40), st.binary(max_size=4)), max_size=2),
    st.integers(-3, 3),
)
def test_fast_decoders_agree_with_the_reference(tb, edits, cut) -> None:  # type: ignore[no-untyped-def]
    """Well-formed and refused bodies, with bytes replaced, cut short or extended: the fast
    path gives the same message, or the same 08P01, as the full decoder."""
    t, body = tb
    assert _decoded(t, body) == _reference_decode(t, body)
    mutated = bytearray(body)
    for pos, data in edits:
        mutated[pos : pos + len(data)] = data
    mutated = mutated[: len(mutated) + cut] if cut < 0 else mutated + b"\x00" * cut
    assert _decoded(t, bytes(mutated)) == _reference_decode(t, bytes(mutated))
