"""``COPY (...) TO STDOUT`` of a local answer, byte for byte as PostgreSQL's COPY TO sends it.

Pure (no I/O): the rows of a local answer, their columns' type OIDs and the resolved options
(:class:`rewriter.wrappers.CopyTo`) in, the payloads of the CopyData messages out (copyto.c):

* **text**: each value in its text output form (:mod:`proxy.wire.types`), a backslash, the
  delimiter and the control characters escaped as ``CopyAttributeOutText`` does (``\\b \\f
  \\n \\r \\t \\v`` by letter, other control characters as they are unless one is the
  delimiter), NULL as the NULL string (``\\N``), one message per row ending in ``\\n``;
* **csv**: a value quoted when it holds the delimiter, the quote, ``\\r`` or ``\\n``, equals the
  NULL string, is ``\\.`` alone in a one-column copy, or its column is in FORCE_QUOTE; inside
  quotes the quote and the escape characters are preceded by the escape character; NULL is
  the NULL string unquoted (``CopyAttributeOutCSV``);
* **binary**: the signature ``PGCOPY\\n\\377\\r\\n\\0``, a zero flags field and a zero header
  extension length (sent with the first row, as PostgreSQL buffers them), then per row a
  16-bit field count and per field a 32-bit length (-1 for NULL) and the value's binary send
  form; a 16-bit -1 trailer in a message of its own.

A header line (text and CSV, ``HEADER``) is a message of its own, of the column names written
as values are.

>>> from rewriter.wrappers import CopyTo
>>> copy_data(CopyTo(), ("n", "s"), (20, 25), [(1, "a\\tb"), (None, "")])
[b'1\\ta\\\\tb\\n', b'\\\\N\\t\\n']
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from proxy.wire import types as pgtypes
from proxy.wire.messages import CopyOutResponse
from proxy.wire.router import EncodedCell
from rewriter.wrappers import CopyTo

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_HEADER = SIGNATURE + struct.pack("!ii", 0, 0)
_TRAILER = struct.pack("!h", -1)
# CopyAttributeOutText: the control characters written as a backslash and a letter.
_LETTERS = {0x08: b"b", 0x0C: b"f", 0x0A: b"n", 0x0D: b"r", 0x09: b"t", 0x0B: b"v"}


def copy_response(spec: CopyTo, columns: int) -> CopyOutResponse:
    """The CopyOutResponse: overall format 0 (text, CSV) or 1 (binary), every column alike."""
    fmt = 1 if spec.format == "binary" else 0
    return CopyOutResponse(format=fmt, column_formats=(fmt,) * columns)


def copy_data(
    spec: CopyTo,
    names: Sequence[str],
    oids: Sequence[int],
    rows: Iterable[Sequence[object]],
) -> list[bytes]:
    """The CopyData payloads of ``rows`` (Python values, None for NULL, or EncodedCell)."""
    if spec.format == "binary":
        return _binary(oids, rows)
    line = _csv_line if spec.format == "csv" else _text_line
    out: list[bytes] = []
    if spec.header:
        out.append(line(spec, [n.encode() for n in names], header=True))
    for row in rows:
        cells = [_text_cell(oid, v) for oid, v in zip(oids, row, strict=True)]
        out.append(line(spec, cells, header=False))
    return out


def _text_cell(oid: int, value: object) -> bytes | None:
    if isinstance(value, EncodedCell):
        if value.text is None:
            raise ValueError("encoded cell lacks the text format")
        return value.text
    return pgtypes.encode(oid, value, 0)


def _text_line(spec: CopyTo, cells: Sequence[bytes | None], *, header: bool) -> bytes:
    delim = spec.delimiter.encode()
    null = spec.null.encode()
    return delim.join(null if c is None else _escape_text(c, delim[0]) for c in cells) + b"\n"


def _escape_text(value: bytes, delim: int) -> bytes:
    if not any(b < 0x20 or b == 0x5C or b == delim for b in value):
        return value
    out = bytearray()
    for b in value:
        if b < 0x20:
            letter = _LETTERS.get(b)
            if letter is not None:
                out += b"\\" + letter
                continue
            if b == delim:
                out += b"\\"
            out.append(b)
        elif b == 0x5C or b == delim:
            out += b"\\"
            out.append(b)
        else:
            out.append(b)
    return bytes(out)


def _csv_line(spec: CopyTo, cells: Sequence[bytes | None], *, header: bool) -> bytes:
    delim = spec.delimiter.encode()
    null = spec.null.encode()
    single = len(cells) == 1
    parts: list[bytes] = []
    for i, c in enumerate(cells):
        if c is None:
            parts.append(null)
        else:
            forced = not header and i < len(spec.force_quote) and spec.force_quote[i]
            parts.append(_csv_value(spec, c, forced, single))
    return delim.join(parts) + b"\n"


def _csv_value(spec: CopyTo, value: bytes, quote: bool, single: bool) -> bytes:
    delim, q, esc = spec.delimiter.encode(), spec.quote.encode(), spec.escape.encode()
    if not quote and value == spec.null.encode():
        quote = True
    if not quote:
        if single and value == b"\\.":
            quote = True
        else:
            quote = any(x in value for x in (delim, q, b"\n", b"\r"))
    if not quote:
        return value
    out = bytearray(q)
    for b in value:
        if b == q[0] or b == esc[0]:
            out += esc
        out.append(b)
    out += q
    return bytes(out)


def _binary(oids: Sequence[int], rows: Iterable[Sequence[object]]) -> list[bytes]:
    out: list[bytes] = []
    pending = bytearray(_HEADER)  # sent with the first row (PostgreSQL buffers it)
    for row in rows:
        pending += struct.pack("!h", len(row))
        for oid, v in zip(oids, row, strict=True):
            cell = _binary_cell(oid, v)
            if cell is None:
                pending += struct.pack("!i", -1)
            else:
                pending += struct.pack("!i", len(cell)) + cell
        out.append(bytes(pending))
        pending = bytearray()
    pending += _TRAILER
    out.append(bytes(pending))
    return out


def _binary_cell(oid: int, value: object) -> bytes | None:
    if isinstance(value, EncodedCell):
        if value.binary is None:
            raise ValueError("encoded cell lacks the binary format")
        return value.binary
    return pgtypes.encode(oid, value, 1)
