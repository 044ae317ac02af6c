"""The value codec, diffed against PostgreSQL's own text and binary output."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import psycopg
import pytest

from proxy.wire import types as t

UTC = dt.UTC
CASES: list[tuple[int, str, object]] = [
    (t.INT2, "-5::int2", -5),
    (t.INT4, "42::int4", 42),
    (t.INT8, "1099511627776::int8", 2**40),
    (t.INT8, "-1::int8", -1),
    (t.FLOAT4, "0.1::float4", 0.1),
    (t.FLOAT4, "1e20::float4", 1e20),
    (t.FLOAT8, "0.1::float8", 0.1),
    (t.FLOAT8, "1e20::float8", 1e20),
    (t.FLOAT8, "123456789012345::float8", 123456789012345.0),
    (t.FLOAT8, "-1.5e-7::float8", -1.5e-7),
    (t.FLOAT8, "'Infinity'::float8", math.inf),
    (t.FLOAT8, "2.5::float8", 2.5),
    (t.NUMERIC, "1.5::numeric", Decimal("1.5")),
    (t.NUMERIC, "0::numeric", Decimal("0")),
    (t.NUMERIC, "-0.0001::numeric", Decimal("-0.0001")),
    (t.NUMERIC, "12345678.9::numeric", Decimal("12345678.9")),
    (t.NUMERIC, "100000::numeric", Decimal("100000")),
    (t.NUMERIC, "0.00000001::numeric", Decimal("0.00000001")),
    (t.NUMERIC, "'NaN'::numeric", Decimal("NaN")),
    (t.NUMERIC, "123.4500::numeric", Decimal("123.4500")),
    (t.TEXT, "'héllo'::text", "héllo"),
    (t.VARCHAR, "'x'::varchar", "x"),
    (t.BOOL, "true", True),
    (t.BOOL, "false", False),
    (t.DATE, "'2026-11-29'::date", dt.date(2026, 11, 29)),
    (t.DATE, "'1999-01-01'::date", dt.date(1999, 1, 1)),
    (
        t.TIMESTAMP,
        "'2026-11-29 12:34:56.789'::timestamp",
        dt.datetime(2026, 11, 29, 12, 34, 56, 789000),
    ),
    (t.TIMESTAMP, "'1990-01-01 00:00:00'::timestamp", dt.datetime(1990, 1, 1)),
    (
        t.TIMESTAMPTZ,
        "'2026-11-29 12:34:56.5+00'::timestamptz",
        dt.datetime(2026, 11, 29, 12, 34, 56, 500000, tzinfo=UTC),
    ),
]


@pytest.fixture(scope="module")
def backend(pg):  # type: ignore[no-untyped-def]
    with psycopg.connect(pg.passthrough_dsn, autocommit=True) as c:
        c.execute("SET TimeZone = 'UTC'; SET extra_float_digits = 1")
        yield c


def _pg_value(conn: psycopg.Connection[object], expr: str, fmt: int) -> bytes:
    res = conn.pgconn.exec_params(f"SELECT {expr}".encode(), [], result_format=fmt)
    v = res.get_value(0, 0)
    assert v is not None, res.error_message
    return bytes(v)


@pytest.mark.parametrize(("oid", "expr", "value"), CASES, ids=[c[1] for c in CASES])
def test_encode_like_postgres(backend, oid: int, expr: str, value: object) -> None:  # type: ignore[no-untyped-def]
    text = _pg_value(backend, expr, 0)
    binary = _pg_value(backend, expr, 1)
    assert t.encode_text(oid, value) == text
    assert t.encode_binary(oid, value) == binary
    for fmt, data in ((0, text), (1, binary)):
        back = t.decode(oid, data, fmt)
        if isinstance(value, float) and math.isnan(value):
            continue
        if isinstance(value, Decimal) and value.is_nan():
            assert isinstance(back, Decimal) and back.is_nan()
        elif oid == t.FLOAT4:
            assert back == pytest.approx(value, rel=1e-6)
        else:
            assert back == value


def test_null_and_unsupported() -> None:
    assert t.encode(t.INT4, None, 1) is None
    with pytest.raises(t.UnsupportedType):
        t.encode_text(600, (1, 2))  # point
    with pytest.raises(t.UnsupportedType):
        t.encode_binary(t.INT4, "x")
