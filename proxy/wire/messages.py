"""PostgreSQL protocol 3.0 messages: one frozen dataclass each, encode and decode beside it.

Byte layouts follow the PostgreSQL documentation, "Message Formats"
(https://www.postgresql.org/docs/current/protocol-message-formats.html): every message after
start-up is ``Byte1 type, Int32 length (including itself), body``; the start-up packets
(StartupMessage, SSLRequest, GSSENCRequest, CancelRequest) have no type byte.

Decoding is defensive: every length and count is checked against what is left of the body and
against a bound, and any malformed input raises :class:`proxy.exceptions.ProtocolViolation`, never
another exception (a property the tests check with random bytes).

>>> Query(sql="SELECT 1").encode()
b'Q\\x00\\x00\\x00\\rSELECT 1\\x00'
>>> decode_frontend(b"Q", b"SELECT 1\\x00")
Query(sql='SELECT 1')
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

from dp.errors import LaprasError
from proxy.exceptions import CharacterNotInRepertoire, ProtocolError, ProtocolViolation

# Bounds (PostgreSQL's own where it has one: MAX_STARTUP_PACKET_LENGTH is 10000 bytes,
# PQ_SMALL_MESSAGE_LIMIT 10000 bytes for messages that never carry user data).
MAX_STARTUP_PACKET = 10_000
SMALL_MESSAGE_LIMIT = 10_000
DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024
MAX_BACKEND_MESSAGE = 1024 * 1024 * 1024

PROTOCOL_3_0 = 3 << 16
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104
CANCEL_REQUEST_CODE = 80877102

_I16 = struct.Struct("!h")
_U16 = struct.Struct("!H")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_HDR = struct.Struct("!ci")


class _Reader:
    """A bounded cursor over one message body; any overrun is a protocol violation."""

    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def _bad(self, why: str) -> ProtocolViolation:
        return ProtocolViolation(f"invalid {self._what} message format: {why}")

    def int16(self) -> int:
        if self._pos + 2 > len(self._data):
            raise self._bad("truncated Int16")
        (v,) = _I16.unpack_from(self._data, self._pos)
        self._pos += 2
        return int(v)

    def int32(self) -> int:
        if self._pos + 4 > len(self._data):
            raise self._bad("truncated Int32")
        (v,) = _I32.unpack_from(self._data, self._pos)
        self._pos += 4
        return int(v)

    def uint32(self) -> int:
        if self._pos + 4 > len(self._data):
            raise self._bad("truncated Int32")
        (v,) = _U32.unpack_from(self._data, self._pos)
        self._pos += 4
        return int(v)

    def count(self) -> int:
        n = self.int16()
        if n < 0:
            raise self._bad("negative count")
        return n

    def int16s(self, n: int) -> tuple[int, ...]:
        if self._pos + 2 * n > len(self._data):
            raise self._bad("truncated Int16")
        v = struct.unpack_from(f"!{n}h", self._data, self._pos)
        self._pos += 2 * n
        return v

    def byte(self) -> bytes:
        if self._pos >= len(self._data):
            raise self._bad("truncated Byte1")
        b = self._data[self._pos : self._pos + 1]
        self._pos += 1
        return b

    def raw(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise self._bad("length out of range")
        b = self._data[self._pos : self._pos + n]
        self._pos += n
        return b

    def rest(self) -> bytes:
        b = self._data[self._pos :]
        self._pos = len(self._data)
        return b

    def cstring(self) -> str:
        end = self._data.find(b"\x00", self._pos)
        if end < 0:
            raise self._bad("unterminated string")
        raw = self._data[self._pos : end]
        self._pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._bad("invalid UTF-8 in string") from None

    def value(self) -> bytes | None:
        """Int32 length (-1 = NULL) followed by that many bytes (Bind, DataRow, FunctionCall)."""
        n = self.int32()
        if n == -1:
            return None
        return self.raw(n)

    def at_end(self) -> bool:
        return self._pos >= len(self._data)

    def done(self) -> None:
        if self._pos != len(self._data):
            raise self._bad("trailing bytes")


def _cstr(s: str) -> bytes:
    b = s.encode("utf-8")
    if b"\x00" in b:
        raise ValueError("a protocol string cannot contain NUL")
    return b + b"\x00"


def _frame(type_byte: bytes, body: bytes) -> bytes:
    return _HDR.pack(type_byte, len(body) + 4) + body


def _values(values: tuple[bytes | None, ...]) -> bytes:
    out = [struct.pack("!h", len(values))]
    for v in values:
        if v is None:
            out.append(_I32.pack(-1))
        else:
            out.append(_I32.pack(len(v)))
            out.append(v)
    return b"".join(out)


def _int16s(values: tuple[int, ...]) -> bytes:
    return struct.pack(f"!h{len(values)}h", len(values), *values)


# --------------------------------------------------------------------------------------------
# Start-up packets (no type byte). protocol-message-formats: StartupMessage, SSLRequest,
# GSSENCRequest, CancelRequest.


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupMessage:
    """Protocol version (major << 16 | minor) and the parameter name/value pairs."""

    protocol: int = PROTOCOL_3_0
    params: tuple[tuple[str, str], ...] = ()

    def get(self, name: str, default: str | None = None) -> str | None:
        for k, v in self.params:
            if k == name:
                return v
        return default

    @property
    def major(self) -> int:
        return self.protocol >> 16

    @property
    def minor(self) -> int:
        return self.protocol & 0xFFFF

    def encode(self) -> bytes:
        body = _I32.pack(self.protocol)
        body += b"".join(_cstr(k) + _cstr(v) for k, v in self.params) + b"\x00"
        return _I32.pack(len(body) + 4) + body


@dataclass(frozen=True, slots=True, kw_only=True)
class SSLRequest:
    def encode(self) -> bytes:
        return _I32.pack(8) + _I32.pack(SSL_REQUEST_CODE)


@dataclass(frozen=True, slots=True, kw_only=True)
class GSSENCRequest:
    def encode(self) -> bytes:
        return _I32.pack(8) + _I32.pack(GSSENC_REQUEST_CODE)


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequest:
    pid: int
    key: int

    def encode(self) -> bytes:
        return (
            _I32.pack(16)
            + _I32.pack(CANCEL_REQUEST_CODE)
            + _I32.pack(self.pid)
            + _U32.pack(self.key & 0xFFFFFFFF)
        )


StartupPacket = StartupMessage | SSLRequest | GSSENCRequest | CancelRequest


def decode_startup_packet(body: bytes) -> StartupPacket:
    """Decode a start-up packet body (the bytes after its Int32 length)."""
    r = _Reader(body, "startup packet")
    code = r.int32()
    if code == SSL_REQUEST_CODE:
        r.done()
        return SSLRequest()
    if code == GSSENC_REQUEST_CODE:
        r.done()
        return GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        pid = r.int32()
        key = r.uint32()
        r.done()
        return CancelRequest(pid=pid, key=key)
    params: list[tuple[str, str]] = []
    if (code >> 16) == 3:
        # A list of name/value pairs ended by an empty name (protocol-message-formats).
        while True:
            name = r.cstring()
            if name == "":
                break
            params.append((name, r.cstring()))
            if len(params) > 1000:
                raise ProtocolViolation("too many startup parameters")
        r.done()
    # Other major versions are refused by the state machine with PostgreSQL's own message.
    return StartupMessage(protocol=code, params=tuple(params))


# --------------------------------------------------------------------------------------------
# Frontend messages (client -> server), protocol-message-formats.


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    TYPE: ClassVar[bytes] = b"Q"
    sql: str

    def encode(self) -> bytes:
        return _frame(self.TYPE, _cstr(self.sql))


@dataclass(frozen=True, slots=True, kw_only=True)
class Parse:
    TYPE: ClassVar[bytes] = b"P"
    name: str = ""
    sql: str
    param_oids: tuple[int, ...] = ()

    def encode(self) -> bytes:
        body = _cstr(self.name) + _cstr(self.sql)
        body += struct.pack(f"!h{len(self.param_oids)}I", len(self.param_oids), *self.param_oids)
        return _frame(self.TYPE, body)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bind:
    TYPE: ClassVar[bytes] = b"B"
    portal: str = ""
    statement: str = ""
    param_formats: tuple[int, ...] = ()
    params: tuple[bytes | None, ...] = ()
    result_formats: tuple[int, ...] = ()

    def encode(self) -> bytes:
        body = _cstr(self.portal) + _cstr(self.statement) + _int16s(self.param_formats)
        body += _values(self.params) + _int16s(self.result_formats)
        return _frame(self.TYPE, body)

    def param_format(self, i: int) -> int:
        """Format of parameter ``i``: no codes = text, one code = all, else one per parameter."""
        if not self.param_formats:
            return 0
        if len(self.param_formats) == 1:
            return self.param_formats[0]
        return self.param_formats[i]


@dataclass(frozen=True, slots=True, kw_only=True)
class Describe:
    TYPE: ClassVar[bytes] = b"D"
    kind: Literal["S", "P"]
    name: str = ""

    def encode(self) -> bytes:
        return _frame(self.TYPE, self.kind.encode() + _cstr(self.name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Execute:
    TYPE: ClassVar[bytes] = b"E"
    portal: str = ""
    max_rows: int = 0

    def encode(self) -> bytes:
        return _frame(self.TYPE, _cstr(self.portal) + _I32.pack(self.max_rows))


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    TYPE: ClassVar[bytes] = b"C"
    kind: Literal["S", "P"]
    name: str = ""

    def encode(self) -> bytes:
        return _frame(self.TYPE, self.kind.encode() + _cstr(self.name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Sync:
    TYPE: ClassVar[bytes] = b"S"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class Flush:
    TYPE: ClassVar[bytes] = b"H"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class Terminate:
    TYPE: ClassVar[bytes] = b"X"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class PasswordMessage:
    """'p': PasswordMessage, SASLInitialResponse or SASLResponse; which one depends on the
    authentication request that preceded it, so the body stays raw here."""

    TYPE: ClassVar[bytes] = b"p"
    data: bytes

    def encode(self) -> bytes:
        return _frame(self.TYPE, self.data)

    def password(self) -> str:
        r = _Reader(self.data, "PasswordMessage")
        s = r.cstring()
        r.done()
        return s

    def sasl_initial(self) -> tuple[str, bytes | None]:
        """SASLInitialResponse: mechanism name, Int32 length (-1 = none), data."""
        r = _Reader(self.data, "SASLInitialResponse")
        mech = r.cstring()
        data = r.value()
        r.done()
        return mech, data

    @staticmethod
    def sasl_initial_response(mechanism: str, data: bytes) -> PasswordMessage:
        return PasswordMessage(data=_cstr(mechanism) + _I32.pack(len(data)) + data)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyData:
    TYPE: ClassVar[bytes] = b"d"
    data: bytes

    def encode(self) -> bytes:
        return _frame(self.TYPE, self.data)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyDone:
    TYPE: ClassVar[bytes] = b"c"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyFail:
    TYPE: ClassVar[bytes] = b"f"
    message: str

    def encode(self) -> bytes:
        return _frame(self.TYPE, _cstr(self.message))


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCall:
    TYPE: ClassVar[bytes] = b"F"
    function_oid: int
    arg_formats: tuple[int, ...] = ()
    args: tuple[bytes | None, ...] = ()
    result_format: int = 0

    def encode(self) -> bytes:
        body = _U32.pack(self.function_oid) + _int16s(self.arg_formats) + _values(self.args)
        return _frame(self.TYPE, body + struct.pack("!h", self.result_format))


FrontendMessage = (
    Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Close
    | Sync
    | Flush
    | Terminate
    | PasswordMessage
    | CopyData
    | CopyDone
    | CopyFail
    | FunctionCall
)


def _format_codes(r: _Reader) -> tuple[int, ...]:
    codes = r.int16s(r.count())
    if any(c not in (0, 1) for c in codes):
        raise ProtocolViolation(
            f"unsupported format code: {next(c for c in codes if c not in (0, 1))}"
        )
    return codes


def _kind(r: _Reader) -> Literal["S", "P"]:
    k = r.byte()
    if k == b"S":
        return "S"
    if k == b"P":
        return "P"
    raise ProtocolViolation(f"invalid DESCRIBE/CLOSE message subtype {k[0]}")


def _empty(r: _Reader) -> None:
    r.done()


def _d_query(r: _Reader) -> Query:
    sql = r.cstring()
    r.done()
    return Query(sql=sql)


def _d_parse(r: _Reader) -> Parse:
    name = r.cstring()
    sql = r.cstring()
    oids = tuple(r.uint32() for _ in range(r.count()))
    r.done()
    return Parse(name=name, sql=sql, param_oids=oids)


def _d_bind(r: _Reader) -> Bind:
    portal = r.cstring()
    stmt = r.cstring()
    pfmts = _format_codes(r)
    params = tuple(r.value() for _ in range(r.count()))
    rfmts = _format_codes(r)
    r.done()
    if len(pfmts) > 1 and len(pfmts) != len(params):
        raise ProtocolViolation(
            f"bind message has {len(pfmts)} parameter formats but {len(params)} parameters"
        )
    return Bind(
        portal=portal, statement=stmt, param_formats=pfmts, params=params, result_formats=rfmts
    )


def _d_describe(r: _Reader) -> Describe:
    kind = _kind(r)
    name = r.cstring()
    r.done()
    return Describe(kind=kind, name=name)


def _d_execute(r: _Reader) -> Execute:
    portal = r.cstring()
    n = r.int32()
    r.done()
    return Execute(portal=portal, max_rows=max(n, 0))


def _d_close(r: _Reader) -> Close:
    kind = _kind(r)
    name = r.cstring()
    r.done()
    return Close(kind=kind, name=name)


def _d_sync(r: _Reader) -> Sync:
    r.done()
    return Sync()


def _d_flush(r: _Reader) -> Flush:
    r.done()
    return Flush()


def _d_terminate(r: _Reader) -> Terminate:
    r.done()
    return Terminate()


def _d_password(r: _Reader) -> PasswordMessage:
    return PasswordMessage(data=r.rest())


def _d_copydata(r: _Reader) -> CopyData:
    return CopyData(data=r.rest())


def _d_copydone(r: _Reader) -> CopyDone:
    r.done()
    return CopyDone()


def _d_copyfail(r: _Reader) -> CopyFail:
    m = r.cstring()
    r.done()
    return CopyFail(message=m)


def _d_funccall(r: _Reader) -> FunctionCall:
    oid = r.uint32()
    afmts = _format_codes(r)
    args = tuple(r.value() for _ in range(r.count()))
    rfmt = r.int16()
    r.done()
    return FunctionCall(function_oid=oid, arg_formats=afmts, args=args, result_format=rfmt)


_FRONTEND: dict[bytes, Callable[[_Reader], FrontendMessage]] = {
    b"Q": _d_query,
    b"P": _d_parse,
    b"B": _d_bind,
    b"D": _d_describe,
    b"E": _d_execute,
    b"C": _d_close,
    b"S": _d_sync,
    b"H": _d_flush,
    b"X": _d_terminate,
    b"p": _d_password,
    b"d": _d_copydata,
    b"c": _d_copydone,
    b"f": _d_copyfail,
    b"F": _d_funccall,
}

# Messages that never carry user data get PostgreSQL's small limit (SocketBackend). Terminate
# must be exactly empty; a Sync or Flush with a body is framed like any message and refused by
# its content (PostgreSQL: ERROR "invalid message format", the session kept), and a CopyDone
# with one is accepted (PostgreSQL does not read CopyDone's body).
FRONTEND_SMALL_TYPES = frozenset(b"DECSHXcf")
FRONTEND_EMPTY_TYPES = frozenset(b"X")
FRONTEND_TYPES = frozenset(_FRONTEND)


# The messages without a body, decoded once (they are frozen values).
_BODILESS: dict[bytes, FrontendMessage] = {
    b"S": Sync(),
    b"H": Flush(),
    b"X": Terminate(),
    b"c": CopyDone(),
}


def _names(body: bytes) -> tuple[str, str, int]:
    """Two NUL-terminated UTF-8 strings at the start of ``body``, and the offset after them
    (ValueError / UnicodeDecodeError when they are not there)."""
    a = body.index(0)
    b = body.index(0, a + 1)
    return body[:a].decode(), body[a + 1 : b].decode(), b + 1


def _fast_bind(body: bytes) -> Bind | None:
    portal, stmt, pos = _names(body)
    (nf,) = _I16.unpack_from(body, pos)
    pfmts = struct.unpack_from(f"!{nf}h", body, pos + 2)
    pos += 2 + 2 * nf
    (np,) = _I16.unpack_from(body, pos)
    pos += 2
    params: list[bytes | None] = []
    for _ in range(np):
        (n,) = _I32.unpack_from(body, pos)
        pos += 4
        if n == -1:
            params.append(None)
            continue
        if n < 0 or pos + n > len(body):
            return None
        params.append(body[pos : pos + n])
        pos += n
    (nr,) = _I16.unpack_from(body, pos)
    rfmts = struct.unpack_from(f"!{nr}h", body, pos + 2)
    if pos + 2 + 2 * nr != len(body) or nf < 0 or nr < 0 or np < 0:
        return None
    if any(c not in (0, 1) for c in pfmts + rfmts) or (nf > 1 and nf != np):
        return None
    return Bind(
        portal=portal,
        statement=stmt,
        param_formats=pfmts,
        params=tuple(params),
        result_formats=rfmts,
    )


def _fast_execute(body: bytes) -> Execute | None:
    end = body.index(0)
    if len(body) != end + 5:
        return None
    (n,) = _I32.unpack_from(body, end + 1)
    return Execute(portal=body[:end].decode(), max_rows=max(n, 0))


def _fast_describe_close(body: bytes, cls: type[Describe] | type[Close]) -> Describe | Close | None:
    kind = body[:1]
    end = body.index(0, 1)
    if kind not in (b"S", b"P") or len(body) != end + 1:
        return None
    return cls(kind="S" if kind == b"S" else "P", name=body[1:end].decode())


# The messages of a relayed prepared statement's round trip, decoded without a _Reader; None
# (or an exception) means "not well formed": the full decoder then says why.
_FAST: dict[bytes, Callable[[bytes], FrontendMessage | None]] = {
    b"B": _fast_bind,
    b"E": _fast_execute,
    b"D": lambda body: _fast_describe_close(body, Describe),
    b"C": lambda body: _fast_describe_close(body, Close),
}


def decode_frontend(type_byte: bytes, body: bytes) -> FrontendMessage:
    """Decode one frontend message body; unknown types and bad layouts are 08P01."""
    if not body and type_byte in _BODILESS:
        return _BODILESS[type_byte]
    fast = _FAST.get(type_byte)
    if fast is not None:
        try:
            msg = fast(body)
        except (ValueError, IndexError, struct.error):  # UnicodeDecodeError is a ValueError
            msg = None
        if msg is not None:
            return msg
    dec = _FRONTEND.get(type_byte)
    if dec is None:
        code = type_byte[0] if type_byte else -1
        raise ProtocolViolation(f"invalid frontend message type {code}")
    return dec(_Reader(body, type_byte.decode("latin-1")))


# --------------------------------------------------------------------------------------------
# Message content read as PostgreSQL reads it. The decoders above are strict: anything that is
# not a well-formed message is refused. PostgreSQL is stricter about framing (a bad type byte
# or length is FATAL) than about content: it reads each message field by field with the
# pq_getmsg* functions (src/backend/libpq/pqformat.c), and a field that is not there is an
# ERROR, after which the session goes on (protocol-flow, "Extended Query": skip to Sync). Where
# the proxy must answer a malformed message itself, it reads the body again with PqReader, in
# PostgreSQL's order, to report what PostgreSQL reports first.


class PqReader:
    """A cursor over a frontend message body with the semantics of pqformat.c.

    Every read raises what PostgreSQL raises: 08P01 :class:`ProtocolError` ("insufficient
    data left in message", "invalid string in message", "invalid message format" for bytes
    left over), or 22021 for a string that is not valid UTF-8 (the encoding the proxy speaks;
    PostgreSQL checks every string against the client encoding).
    Counts are read unsigned (``uint16``), as pq_getmsgint returns them: a count of -1 is 65535.

    >>> r = PqReader(b"p\\x00\\x00\\x01")
    >>> r.string(), r.uint16()
    ('p', 1)
    >>> r.end()
    >>> PqReader(b"\\x00").int32()
    Traceback (most recent call last):
    ...
    proxy.exceptions.ProtocolError: insufficient data left in message
    """

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        """``n`` bytes (pq_getmsgbytes; a negative ``n`` is short data too)."""
        if n < 0 or n > len(self._data) - self._pos:
            raise ProtocolError("insufficient data left in message")
        b = self._data[self._pos : self._pos + n]
        self._pos += n
        return b

    def uint16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def int16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def uint32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def string(self) -> str:
        end = self._data.find(b"\x00", self._pos)
        if end < 0:
            raise ProtocolError("invalid string in message")
        raw = self._data[self._pos : end]
        self._pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _invalid_utf8(raw, e.start) from None

    def end(self) -> None:
        if self._pos != len(self._data):
            raise ProtocolError("invalid message format")


def _invalid_utf8(raw: bytes, start: int) -> CharacterNotInRepertoire:
    """PostgreSQL's report_invalid_encoding (mbutils.c): the bytes of the first invalid
    character, as many as its lead byte announces (pg_utf_mblen), at most what is left."""
    lead = raw[start]
    n = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 1
    shown = " ".join(f"0x{b:02x}" for b in raw[start : start + n])
    return CharacterNotInRepertoire(f'invalid byte sequence for encoding "UTF8": {shown}')


def read_query(body: bytes) -> Query:
    """A Query body as PostgresMain reads it: the query string, then nothing (raises as
    :class:`PqReader`)."""
    r = PqReader(body)
    sql = r.string()
    r.end()
    return Query(sql=sql)


def read_parse(body: bytes) -> Parse:
    """A Parse body as PostgresMain reads it: the statement name, the query string, an
    unsigned Int16 count and that many Int32 type OIDs, then nothing (raises as
    :class:`PqReader`). Laxer than the strict decoder only where PostgreSQL is: a count of
    32768 or more with its OIDs present is a valid Parse."""
    r = PqReader(body)
    name = r.string()
    sql = r.string()
    oids = tuple(r.uint32() for _ in range(r.uint16()))
    r.end()
    return Parse(name=name, sql=sql, param_oids=oids)


def bind_names(body: bytes) -> tuple[str, str] | None:
    """The portal and statement names a Bind body starts with; None when PostgreSQL could not
    read them (it then reports that before anything else)."""
    r = PqReader(body)
    try:
        return r.string(), r.string()
    except LaprasError:
        return None


# --------------------------------------------------------------------------------------------
# Backend messages (server -> client), protocol-message-formats.


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationOk:
    TYPE: ClassVar[bytes] = b"R"

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationCleartextPassword:
    TYPE: ClassVar[bytes] = b"R"

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(3))


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationMD5Password:
    TYPE: ClassVar[bytes] = b"R"
    salt: bytes

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(5) + self.salt)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationSASL:
    TYPE: ClassVar[bytes] = b"R"
    mechanisms: tuple[str, ...]

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(10) + b"".join(map(_cstr, self.mechanisms)) + b"\x00")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationSASLContinue:
    TYPE: ClassVar[bytes] = b"R"
    data: bytes

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(11) + self.data)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationSASLFinal:
    TYPE: ClassVar[bytes] = b"R"
    data: bytes

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(12) + self.data)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticationOther:
    """Authentication requests the proxy never sends (Kerberos, GSS, SSPI): kept raw."""

    TYPE: ClassVar[bytes] = b"R"
    code: int
    data: bytes = b""

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(self.code) + self.data)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParameterStatus:
    TYPE: ClassVar[bytes] = b"S"
    name: str
    value: str

    def encode(self) -> bytes:
        return _frame(self.TYPE, _cstr(self.name) + _cstr(self.value))


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendKeyData:
    """Protocol 3.0: Int32 pid + Int32 key, exactly 12 bytes with the header (pgjdbc checks)."""

    TYPE: ClassVar[bytes] = b"K"
    pid: int
    key: int

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(self.pid) + _U32.pack(self.key & 0xFFFFFFFF))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadyForQuery:
    TYPE: ClassVar[bytes] = b"Z"
    status: Literal["I", "T", "E"]

    def encode(self) -> bytes:
        return _frame(self.TYPE, self.status.encode())


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldDescription:
    """One RowDescription field (protocol-message-formats, RowDescription)."""

    name: str
    table_oid: int = 0
    column_attr: int = 0
    type_oid: int
    type_size: int
    type_modifier: int = -1
    format: int = 0

    def with_format(self, fmt: int) -> FieldDescription:
        return FieldDescription(
            name=self.name,
            table_oid=self.table_oid,
            column_attr=self.column_attr,
            type_oid=self.type_oid,
            type_size=self.type_size,
            type_modifier=self.type_modifier,
            format=fmt,
        )


_FIELD = struct.Struct("!IhIhih")


@dataclass(frozen=True, slots=True, kw_only=True)
class RowDescription:
    TYPE: ClassVar[bytes] = b"T"
    fields: tuple[FieldDescription, ...]

    def encode(self) -> bytes:
        parts = [struct.pack("!h", len(self.fields))]
        for f in self.fields:
            parts.append(_cstr(f.name))
            parts.append(
                _FIELD.pack(
                    f.table_oid, f.column_attr, f.type_oid, f.type_size, f.type_modifier, f.format
                )
            )
        return _frame(self.TYPE, b"".join(parts))


@dataclass(frozen=True, slots=True, kw_only=True)
class DataRow:
    TYPE: ClassVar[bytes] = b"D"
    values: tuple[bytes | None, ...]

    def encode(self) -> bytes:
        return _frame(self.TYPE, _values(self.values))


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandComplete:
    TYPE: ClassVar[bytes] = b"C"
    tag: str

    def encode(self) -> bytes:
        return _frame(self.TYPE, _cstr(self.tag))


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyQueryResponse:
    TYPE: ClassVar[bytes] = b"I"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


def _fields_body(fields: tuple[tuple[str, str], ...]) -> bytes:
    out = []
    for code, value in fields:
        if len(code) != 1:
            raise ValueError("error field codes are one byte")
        out.append(code.encode("ascii") + _cstr(value))
    return b"".join(out) + b"\x00"


def _d_fields(r: _Reader) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    while True:
        code = r.byte()
        if code == b"\x00":
            break
        out.append((code.decode("latin-1"), r.cstring()))
    r.done()
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorResponse:
    """Fields as (code, value) pairs in order: S, V, C, M, D, H, P... (protocol-error-fields)."""

    TYPE: ClassVar[bytes] = b"E"
    fields: tuple[tuple[str, str], ...]

    def field(self, code: str) -> str | None:
        for c, v in self.fields:
            if c == code:
                return v
        return None

    @property
    def sqlstate(self) -> str | None:
        return self.field("C")

    def encode(self) -> bytes:
        return _frame(self.TYPE, _fields_body(self.fields))


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeResponse:
    TYPE: ClassVar[bytes] = b"N"
    fields: tuple[tuple[str, str], ...]

    def field(self, code: str) -> str | None:
        for c, v in self.fields:
            if c == code:
                return v
        return None

    def encode(self) -> bytes:
        return _frame(self.TYPE, _fields_body(self.fields))


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseComplete:
    TYPE: ClassVar[bytes] = b"1"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class BindComplete:
    TYPE: ClassVar[bytes] = b"2"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseComplete:
    TYPE: ClassVar[bytes] = b"3"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class NoData:
    TYPE: ClassVar[bytes] = b"n"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class PortalSuspended:
    TYPE: ClassVar[bytes] = b"s"

    def encode(self) -> bytes:
        return _frame(self.TYPE, b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParameterDescription:
    TYPE: ClassVar[bytes] = b"t"
    oids: tuple[int, ...]

    def encode(self) -> bytes:
        return _frame(self.TYPE, struct.pack(f"!h{len(self.oids)}I", len(self.oids), *self.oids))


@dataclass(frozen=True, slots=True, kw_only=True)
class NegotiateProtocolVersion:
    TYPE: ClassVar[bytes] = b"v"
    newest_minor: int
    unrecognized: tuple[str, ...] = ()

    def encode(self) -> bytes:
        body = _I32.pack(self.newest_minor) + _I32.pack(len(self.unrecognized))
        return _frame(self.TYPE, body + b"".join(map(_cstr, self.unrecognized)))


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyInResponse:
    TYPE: ClassVar[bytes] = b"G"
    format: int
    column_formats: tuple[int, ...]

    def encode(self) -> bytes:
        return _frame(self.TYPE, struct.pack("!b", self.format) + _int16s(self.column_formats))


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyOutResponse:
    TYPE: ClassVar[bytes] = b"H"
    format: int
    column_formats: tuple[int, ...]

    def encode(self) -> bytes:
        return _frame(self.TYPE, struct.pack("!b", self.format) + _int16s(self.column_formats))


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyBothResponse:
    TYPE: ClassVar[bytes] = b"W"
    format: int
    column_formats: tuple[int, ...]

    def encode(self) -> bytes:
        return _frame(self.TYPE, struct.pack("!b", self.format) + _int16s(self.column_formats))


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationResponse:
    TYPE: ClassVar[bytes] = b"A"
    pid: int
    channel: str
    payload: str

    def encode(self) -> bytes:
        return _frame(self.TYPE, _I32.pack(self.pid) + _cstr(self.channel) + _cstr(self.payload))


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCallResponse:
    TYPE: ClassVar[bytes] = b"V"
    value: bytes | None

    def encode(self) -> bytes:
        v = self.value
        return _frame(self.TYPE, _I32.pack(-1) if v is None else _I32.pack(len(v)) + v)


BackendMessage = (
    AuthenticationOk
    | AuthenticationCleartextPassword
    | AuthenticationMD5Password
    | AuthenticationSASL
    | AuthenticationSASLContinue
    | AuthenticationSASLFinal
    | AuthenticationOther
    | ParameterStatus
    | BackendKeyData
    | ReadyForQuery
    | RowDescription
    | DataRow
    | CommandComplete
    | EmptyQueryResponse
    | ErrorResponse
    | NoticeResponse
    | ParseComplete
    | BindComplete
    | CloseComplete
    | NoData
    | PortalSuspended
    | ParameterDescription
    | NegotiateProtocolVersion
    | CopyInResponse
    | CopyOutResponse
    | CopyBothResponse
    | NotificationResponse
    | FunctionCallResponse
    | CopyData
    | CopyDone
)


def _d_auth(r: _Reader) -> BackendMessage:
    code = r.int32()
    if code == 0:
        r.done()
        return AuthenticationOk()
    if code == 3:
        r.done()
        return AuthenticationCleartextPassword()
    if code == 5:
        salt = r.raw(4)
        r.done()
        return AuthenticationMD5Password(salt=salt)
    if code == 10:
        mechs: list[str] = []
        while True:
            m = r.cstring()
            if m == "":
                break
            mechs.append(m)
        r.done()
        return AuthenticationSASL(mechanisms=tuple(mechs))
    if code == 11:
        return AuthenticationSASLContinue(data=r.rest())
    if code == 12:
        return AuthenticationSASLFinal(data=r.rest())
    return AuthenticationOther(code=code, data=r.rest())


def _d_paramstatus(r: _Reader) -> ParameterStatus:
    n = r.cstring()
    v = r.cstring()
    r.done()
    return ParameterStatus(name=n, value=v)


def _d_keydata(r: _Reader) -> BackendKeyData:
    pid = r.int32()
    key = r.uint32()
    r.done()
    return BackendKeyData(pid=pid, key=key)


def _d_ready(r: _Reader) -> ReadyForQuery:
    s = r.byte()
    r.done()
    if s == b"I":
        return ReadyForQuery(status="I")
    if s == b"T":
        return ReadyForQuery(status="T")
    if s == b"E":
        return ReadyForQuery(status="E")
    raise ProtocolViolation(f"invalid transaction status {s!r}")


def _d_rowdesc(r: _Reader) -> RowDescription:
    fields = []
    for _ in range(r.count()):
        name = r.cstring()
        toid = r.uint32()
        attr = r.int16()
        typ = r.uint32()
        size = r.int16()
        mod = r.int32()
        fmt = r.int16()
        fields.append(
            FieldDescription(
                name=name,
                table_oid=toid,
                column_attr=attr,
                type_oid=typ,
                type_size=size,
                type_modifier=mod,
                format=fmt,
            )
        )
    r.done()
    return RowDescription(fields=tuple(fields))


def _d_datarow(r: _Reader) -> DataRow:
    vals = tuple(r.value() for _ in range(r.count()))
    r.done()
    return DataRow(values=vals)


def _d_cmdcomplete(r: _Reader) -> CommandComplete:
    t = r.cstring()
    r.done()
    return CommandComplete(tag=t)


def _d_error(r: _Reader) -> ErrorResponse:
    return ErrorResponse(fields=_d_fields(r))


def _d_notice(r: _Reader) -> NoticeResponse:
    return NoticeResponse(fields=_d_fields(r))


def _d_paramdesc(r: _Reader) -> ParameterDescription:
    oids = tuple(r.uint32() for _ in range(r.count()))
    r.done()
    return ParameterDescription(oids=oids)


def _d_negotiate(r: _Reader) -> NegotiateProtocolVersion:
    minor = r.int32()
    n = r.int32()
    if n < 0 or n > 1000:
        raise ProtocolViolation("invalid NegotiateProtocolVersion option count")
    opts = tuple(r.cstring() for _ in range(n))
    r.done()
    return NegotiateProtocolVersion(newest_minor=minor, unrecognized=opts)


def _copy_fmt(r: _Reader) -> tuple[int, tuple[int, ...]]:
    fmt = r.byte()[0]
    cols = tuple(r.int16() for _ in range(r.count()))
    r.done()
    return fmt, cols


def _d_copyin(r: _Reader) -> CopyInResponse:
    f, c = _copy_fmt(r)
    return CopyInResponse(format=f, column_formats=c)


def _d_copyout(r: _Reader) -> CopyOutResponse:
    f, c = _copy_fmt(r)
    return CopyOutResponse(format=f, column_formats=c)


def _d_copyboth(r: _Reader) -> CopyBothResponse:
    f, c = _copy_fmt(r)
    return CopyBothResponse(format=f, column_formats=c)


def _d_notification(r: _Reader) -> NotificationResponse:
    pid = r.int32()
    ch = r.cstring()
    pl = r.cstring()
    r.done()
    return NotificationResponse(pid=pid, channel=ch, payload=pl)


def _d_fcresponse(r: _Reader) -> FunctionCallResponse:
    v = r.value()
    r.done()
    return FunctionCallResponse(value=v)


def _d_simple(
    cls: type[
        ParseComplete | BindComplete | CloseComplete | NoData | PortalSuspended | EmptyQueryResponse
    ],
) -> Callable[[_Reader], BackendMessage]:
    def dec(r: _Reader) -> BackendMessage:
        r.done()
        return cls()

    return dec


_BACKEND: dict[bytes, Callable[[_Reader], BackendMessage]] = {
    b"R": _d_auth,
    b"S": _d_paramstatus,
    b"K": _d_keydata,
    b"Z": _d_ready,
    b"T": _d_rowdesc,
    b"D": _d_datarow,
    b"C": _d_cmdcomplete,
    b"I": _d_simple(EmptyQueryResponse),
    b"E": _d_error,
    b"N": _d_notice,
    b"1": _d_simple(ParseComplete),
    b"2": _d_simple(BindComplete),
    b"3": _d_simple(CloseComplete),
    b"n": _d_simple(NoData),
    b"s": _d_simple(PortalSuspended),
    b"t": _d_paramdesc,
    b"v": _d_negotiate,
    b"G": _d_copyin,
    b"H": _d_copyout,
    b"W": _d_copyboth,
    b"A": _d_notification,
    b"V": _d_fcresponse,
    b"d": _d_copydata,
    b"c": _d_copydone,
}


def decode_backend(type_byte: bytes, body: bytes) -> BackendMessage:
    """Decode one backend message body (used for the upstream leg and in tests)."""
    dec = _BACKEND.get(type_byte)
    if dec is None:
        code = type_byte[0] if type_byte else -1
        raise ProtocolViolation(f"invalid backend message type {code}")
    return dec(_Reader(body, type_byte.decode("latin-1")))


@functools.lru_cache(maxsize=16)
def _frame_limits(
    max_message: int, small_types: frozenset[int], empty_types: frozenset[int]
) -> tuple[int, ...]:
    """Per type byte, the largest length field a frame may have (one table shared by every
    connection with the same limits)."""
    return tuple(
        4 if t in empty_types else SMALL_MESSAGE_LIMIT if t in small_types else max_message
        for t in range(256)
    )


class FrameBuffer:
    """Splits a byte stream into ``(type, body)`` frames with a bound on each length.

    Sans-IO: ``feed`` bytes, then ``next_frame`` until it returns None. Used for the upstream
    leg (backend messages) and by :mod:`proxy.wire.protocol` for the client leg.
    """

    __slots__ = ("_buf", "_empty", "_limits", "_max", "_small")

    def __init__(
        self,
        *,
        max_message: int = DEFAULT_MAX_MESSAGE,
        small_types: frozenset[int] = frozenset(),
        empty_types: frozenset[int] = frozenset(),
    ) -> None:
        self._buf = bytearray()
        self._max = max_message
        self._small = small_types
        self._empty = empty_types
        # The largest length field allowed per type byte (4 = no body allowed).
        self._limits = _frame_limits(max_message, small_types, empty_types)

    def feed(self, data: bytes) -> None:
        self._buf += data

    def __len__(self) -> int:
        return len(self._buf)

    def take(self, n: int) -> bytes:
        b = bytes(self._buf[:n])
        del self._buf[:n]
        return b

    def peek(self, n: int) -> bytes:
        return bytes(self._buf[:n])

    def _length(self, pos: int) -> int:
        """The checked length field of the frame starting at ``pos`` (5 bytes buffered)."""
        t = self._buf[pos]
        (length,) = _I32.unpack_from(self._buf, pos + 1)
        if 4 <= length <= self._limits[t]:
            return int(length)
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if t in self._empty:
            raise ProtocolViolation(f"invalid message length {length} for type {chr(t)!r}")
        raise ProtocolViolation(f"message of type {chr(t)!r} too large ({length} bytes)")

    def next_frame(self) -> tuple[bytes, bytes] | None:
        """The next complete frame as ``(type, body)``, or None."""
        frame = self.next_raw()
        return None if frame is None else (frame[:1], frame[5:])

    def next_raw(self) -> bytes | None:
        """The next complete frame as it came (type byte, length, body), or None."""
        buf = self._buf
        if len(buf) < 5:
            return None
        end = self._length(0) + 1
        if len(buf) < end:
            return None
        frame = bytes(buf[:end])
        del buf[:end]
        return frame

    def raw_frames(self) -> list[bytes]:
        """Every complete frame buffered, each as it came (type byte, length, body): one
        pass and one cut of the buffer, for relaying a whole read at once."""
        buf = self._buf
        n = len(buf)
        pos = 0
        out: list[bytes] = []
        limits = self._limits
        while n - pos >= 5:
            (length,) = _I32.unpack_from(buf, pos + 1)
            if not 4 <= length <= limits[buf[pos]]:
                self._length(pos)  # raises the right violation
            end = pos + length + 1
            if end > n:
                break
            out.append(bytes(buf[pos:end]))
            pos = end
        if pos:
            del buf[:pos]
        return out
