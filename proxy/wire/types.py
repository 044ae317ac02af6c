"""Text and binary encodings of the value types a local answer or a parameter may have.

The formats are PostgreSQL's send/recv and out/in functions (protocol-overview "Formats and
Format Codes"; the binary layouts are those of ``int8send``, ``numeric_send``, ``date_send``,
``timestamp_send``...). Only the types DP answers and their parameters use are covered:
int2/int4/int8, float4/float8, numeric, text/varchar/bpchar/name/unknown, bool, date,
timestamp, timestamptz, oid. Anything else raises :class:`UnsupportedType`.

>>> encode_binary(NUMERIC, Decimal("1.5"))
b'\\x00\\x02\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x01\\x13\\x88'
>>> decode_binary(INT4, b"\\x00\\x00\\x00*")
42
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal

from rewriter.pgtypes import array_elements
from rewriter.schema import ARRAY_OIDS, TYPE_OIDS

BOOL = 16
BYTEA = 17
NAME = 19
INT8 = 20
INT2 = 21
INT4 = 23
TEXT = 25
OID = 26
FLOAT4 = 700
FLOAT8 = 701
UNKNOWN = 705
BPCHAR = 1042
VARCHAR = 1043
DATE = 1082
TIMESTAMP = 1114
TIMESTAMPTZ = 1184
NUMERIC = 1700

STRING_TYPES = frozenset({TEXT, VARCHAR, BPCHAR, NAME, UNKNOWN})

#: One-dimensional arrays decoded as parameters (asyncpg's and psycopg's lists, ``x =
#: ANY($1)``): each array type's OID and its element's.
ARRAY_ELEMENTS = {oid: TYPE_OIDS[name] for oid, name in ARRAY_OIDS.items()}

# typlen of each type, for RowDescription fields built without an upstream Describe.
TYPE_SIZE = {
    BOOL: 1,
    INT8: 8,
    INT2: 2,
    INT4: 4,
    OID: 4,
    FLOAT4: 4,
    FLOAT8: 8,
    DATE: 4,
    TIMESTAMP: 8,
    TIMESTAMPTZ: 8,
    NAME: 64,
}

_EPOCH_DATE = dt.date(2000, 1, 1)
_EPOCH_TS = dt.datetime(2000, 1, 1)
_EPOCH_TSTZ = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_EPOCH_ORDINAL = _EPOCH_DATE.toordinal()

_NUMERIC_POS = 0x0000
_NUMERIC_NEG = 0x4000
_NUMERIC_NAN = 0xC000
_NUMERIC_PINF = 0xD000
_NUMERIC_NINF = 0xF000


class UnsupportedType(ValueError):
    """A type OID or value this codec does not handle."""


def type_size(oid: int) -> int:
    return TYPE_SIZE.get(oid, -1)


# -- output -------------------------------------------------------------------------------


def _float_text(v: float, *, single: bool) -> str:
    # float8out/float4out with extra_float_digits >= 1 (the default since PG 12): shortest
    # exact representation; "Infinity"/"-Infinity"/"NaN"; no trailing ".0".
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if single:
        import numpy as np

        s = str(np.float32(v))
    else:
        s = repr(float(v))
    if "e" in s:
        mant, exp = s.split("e")
        if mant.endswith(".0"):
            mant = mant[:-2]
        sign = exp[0] if exp[0] in "+-" else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    if s.endswith(".0"):
        s = s[:-2]
    return s


def _numeric_text(v: Decimal) -> str:
    if v.is_nan():
        return "NaN"
    if v.is_infinite():
        return "Infinity" if v > 0 else "-Infinity"
    return format(v, "f")


def _as_decimal(v: object) -> Decimal:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, bool):
        raise UnsupportedType("bool is not numeric")
    if isinstance(v, int):
        return Decimal(v)
    if isinstance(v, float):
        return Decimal(repr(v)) if math.isfinite(v) else Decimal(str(v))
    raise UnsupportedType(f"cannot encode {type(v).__name__} as numeric")


def _as_int(v: object) -> int:
    if isinstance(v, bool):
        raise UnsupportedType("bool is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, Decimal) and v == v.to_integral_value():
        return int(v)
    raise UnsupportedType(f"cannot encode {v!r} as an integer")


def _tz_offset_text(off: dt.timedelta) -> str:
    secs = int(off.total_seconds())
    sign = "+" if secs >= 0 else "-"
    secs = abs(secs)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    out = f"{sign}{h:02d}"
    if m or s:
        out += f":{m:02d}"
    if s:
        out += f":{s:02d}"
    return out


def _ts_text(v: dt.datetime) -> str:
    s = v.strftime("%Y-%m-%d %H:%M:%S")
    if v.microsecond:
        s += f".{v.microsecond:06d}".rstrip("0")
    return s


def encode_text(oid: int, value: object) -> bytes:
    """The text output form (``typoutput``) of ``value`` as type ``oid``."""
    if oid in (INT2, INT4, INT8, OID):
        return str(_as_int(value)).encode()
    if oid in (FLOAT4, FLOAT8):
        if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
            raise UnsupportedType(f"cannot encode {value!r} as float")
        return _float_text(float(value), single=oid == FLOAT4).encode()
    if oid == NUMERIC:
        return _numeric_text(_as_decimal(value)).encode()
    if oid in STRING_TYPES:
        return str(value).encode("utf-8")
    if oid == BOOL:
        if not isinstance(value, bool):
            raise UnsupportedType(f"cannot encode {value!r} as bool")
        return b"t" if value else b"f"
    if oid == DATE:
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise UnsupportedType(f"cannot encode {value!r} as date")
        return value.isoformat().encode()
    if oid == TIMESTAMP:
        if not isinstance(value, dt.datetime):
            raise UnsupportedType(f"cannot encode {value!r} as timestamp")
        return _ts_text(value.replace(tzinfo=None)).encode()
    if oid == TIMESTAMPTZ:
        if not isinstance(value, dt.datetime):
            raise UnsupportedType(f"cannot encode {value!r} as timestamptz")
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        off = value.utcoffset() or dt.timedelta(0)
        return (_ts_text(value) + _tz_offset_text(off)).encode()
    if oid == BYTEA:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise UnsupportedType(f"cannot encode {value!r} as bytea")
        return b"\\x" + bytes(value).hex().encode()
    raise UnsupportedType(f"no text encoder for type {oid}")


def _numeric_binary(v: Decimal) -> bytes:
    # numeric_send: ndigits, weight, sign, dscale, then base-10000 digits (numeric.c).
    if v.is_nan():
        return struct.pack("!hhHh", 0, 0, _NUMERIC_NAN, 0)
    if v.is_infinite():
        return struct.pack("!hhHh", 0, 0, _NUMERIC_PINF if v > 0 else _NUMERIC_NINF, 0)
    sign_bit, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    dscale = max(-exp, 0)
    # Scale to an integer whose base-10000 digits are aligned on the decimal point.
    f4 = (dscale + 3) // 4 * 4
    m = int("".join(map(str, digits)) or "0") * 10 ** (exp + f4)
    groups: list[int] = []
    while m:
        m, g = divmod(m, 10000)
        groups.append(g)
    groups.reverse()
    weight = len(groups) - 1 - f4 // 4
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    sign = _NUMERIC_NEG if sign_bit and groups else _NUMERIC_POS
    return struct.pack(f"!hhHh{len(groups)}h", len(groups), weight, sign, dscale, *groups)


def encode_binary(oid: int, value: object) -> bytes:
    """The binary form (``typsend``) of ``value`` as type ``oid``."""
    if oid == INT2:
        return struct.pack("!h", _as_int(value))
    if oid == INT4:
        return struct.pack("!i", _as_int(value))
    if oid == INT8:
        return struct.pack("!q", _as_int(value))
    if oid == OID:
        return struct.pack("!I", _as_int(value))
    if oid in (FLOAT4, FLOAT8):
        if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
            raise UnsupportedType(f"cannot encode {value!r} as float")
        return struct.pack("!f" if oid == FLOAT4 else "!d", float(value))
    if oid == NUMERIC:
        return _numeric_binary(_as_decimal(value))
    if oid in STRING_TYPES:
        return str(value).encode("utf-8")
    if oid == BOOL:
        if not isinstance(value, bool):
            raise UnsupportedType(f"cannot encode {value!r} as bool")
        return b"\x01" if value else b"\x00"
    if oid == DATE:
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise UnsupportedType(f"cannot encode {value!r} as date")
        return struct.pack("!i", value.toordinal() - _EPOCH_ORDINAL)
    if oid == TIMESTAMP:
        if not isinstance(value, dt.datetime):
            raise UnsupportedType(f"cannot encode {value!r} as timestamp")
        delta = value.replace(tzinfo=None) - _EPOCH_TS
        return struct.pack("!q", _micros(delta))
    if oid == TIMESTAMPTZ:
        if not isinstance(value, dt.datetime):
            raise UnsupportedType(f"cannot encode {value!r} as timestamptz")
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return struct.pack("!q", _micros(value - _EPOCH_TSTZ))
    if oid == BYTEA:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise UnsupportedType(f"cannot encode {value!r} as bytea")
        return bytes(value)
    raise UnsupportedType(f"no binary encoder for type {oid}")


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def encode(oid: int, value: object, fmt: int) -> bytes | None:
    """Encode ``value`` (None = SQL NULL) in format ``fmt`` (0 text, 1 binary)."""
    if value is None:
        return None
    return encode_binary(oid, value) if fmt == 1 else encode_text(oid, value)


# -- input --------------------------------------------------------------------------------


def decode_text(oid: int, data: bytes) -> object:
    """Parse the text form of a value of type ``oid`` (what ``typinput`` accepts, simplified)."""
    s = data.decode("utf-8")
    element = ARRAY_ELEMENTS.get(oid)
    if element is not None:
        items = array_elements(s)
        if items is None:
            raise UnsupportedType("only one-dimensional arrays are read as parameters")
        return [None if i is None else decode_text(element, i.encode()) for i in items]
    if oid in (INT2, INT4, INT8, OID):
        return int(s.strip())
    if oid in (FLOAT4, FLOAT8):
        t = s.strip().lower()
        if t in ("infinity", "+infinity", "inf"):
            return math.inf
        if t in ("-infinity", "-inf"):
            return -math.inf
        return float(t)
    if oid == NUMERIC:
        return Decimal(s.strip())
    if oid == BOOL:
        t = s.strip().lower()
        if t in ("t", "true", "y", "yes", "on", "1"):
            return True
        if t in ("f", "false", "n", "no", "off", "0"):
            return False
        raise UnsupportedType(f"invalid input syntax for type boolean: {s!r}")
    if oid == DATE:
        return dt.date.fromisoformat(s.strip())
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        t = s.strip().replace(" ", "T", 1)
        if len(t) >= 3 and t[-3] in "+-" and t[-2:].isdigit() and ":" not in t[-3:]:
            t += ":00"
        v = dt.datetime.fromisoformat(t)
        if oid == TIMESTAMPTZ and v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return v
    if oid == BYTEA and s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    # text, varchar, unknown (OID 0 = let the server infer) and everything else: the string.
    return s


def decode_binary(oid: int, data: bytes) -> object:
    """Parse the binary form of a value of type ``oid`` (``typreceive``)."""
    try:
        if oid == INT2:
            return int(struct.unpack("!h", data)[0])
        if oid == INT4:
            return int(struct.unpack("!i", data)[0])
        if oid == INT8:
            return int(struct.unpack("!q", data)[0])
        if oid == OID:
            return int(struct.unpack("!I", data)[0])
        if oid == FLOAT4:
            return float(struct.unpack("!f", data)[0])
        if oid == FLOAT8:
            return float(struct.unpack("!d", data)[0])
        if oid == BOOL:
            if len(data) != 1:
                raise UnsupportedType("bool is one byte")
            return data != b"\x00"
        if oid == DATE:
            return dt.date.fromordinal(int(struct.unpack("!i", data)[0]) + _EPOCH_ORDINAL)
        if oid == TIMESTAMP:
            return _EPOCH_TS + dt.timedelta(microseconds=struct.unpack("!q", data)[0])
        if oid == TIMESTAMPTZ:
            return _EPOCH_TSTZ + dt.timedelta(microseconds=struct.unpack("!q", data)[0])
        if oid == NUMERIC:
            return _numeric_from_binary(data)
    except struct.error as e:
        raise UnsupportedType(f"invalid binary value for type {oid}: {e}") from None
    if oid in STRING_TYPES or oid == 0:
        return data.decode("utf-8")
    if oid == BYTEA:
        return bytes(data)
    if oid in ARRAY_ELEMENTS:
        return _array_from_binary(data)
    raise UnsupportedType(f"no binary decoder for type {oid}")


def _array_from_binary(data: bytes) -> list[object]:
    """A one-dimensional array's elements (``array_recv``: dimensions, a NULL flag, the
    element type, each dimension's length and lower bound, then each element's length, -1
    for NULL, and bytes)."""
    try:
        ndim, _, element = struct.unpack_from("!iiI", data, 0)
        if ndim == 0:
            return []
        if ndim != 1:
            raise UnsupportedType("only one-dimensional arrays are read as parameters")
        (n,) = struct.unpack_from("!i", data, 12)
        pos = 20
        out: list[object] = []
        for _ in range(n):
            (size,) = struct.unpack_from("!i", data, pos)
            pos += 4
            if size < 0:
                out.append(None)
                continue
            out.append(decode_binary(element, data[pos : pos + size]))
            pos += size
    except struct.error as e:
        raise UnsupportedType(f"invalid binary array: {e}") from None
    if pos != len(data):
        raise UnsupportedType("invalid binary array length")
    return out


def _numeric_from_binary(data: bytes) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHh", data)
    if len(data) != 8 + 2 * ndigits or ndigits < 0:
        raise UnsupportedType("invalid numeric length")
    if sign == _NUMERIC_NAN:
        return Decimal("NaN")
    if sign == _NUMERIC_PINF:
        return Decimal("Infinity")
    if sign == _NUMERIC_NINF:
        return Decimal("-Infinity")
    digits = struct.unpack_from(f"!{ndigits}h", data, 8)
    value = Decimal(0)
    for i, d in enumerate(digits):
        value += Decimal(d).scaleb(4 * (weight - i))
    if sign == _NUMERIC_NEG:
        value = -value
    return value.quantize(Decimal(1).scaleb(-dscale)) if dscale >= 0 else value


def decode(oid: int, data: bytes | None, fmt: int) -> object:
    """Decode one parameter or cell (None = SQL NULL)."""
    if data is None:
        return None
    return decode_binary(oid, data) if fmt == 1 else decode_text(oid, data)
