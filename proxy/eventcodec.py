"""Ledger events to JSON text and back, exactly.

The DP engine's events are frozen dataclasses of a few kinds (``dp.engine``), holding floats,
enums, tuples, numpy arrays, sparse query matrices and domains. They are persisted as JSON so
that the ledger stays readable with plain SQL (``SELECT kind, payload FROM lapras.ledger``).

Decoding is restricted to an allowlist of classes (never ``pickle``: a ledger row must not be
able to run code). Floats round-trip exactly (``repr``), non-finite ones are tagged, arrays are
stored as base64 of their bytes, so the state rebuilt from the ledger is bit-for-bit the state
the engine had.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import json
import math
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Classes a ledger row may name. Adding a class here is a reviewed change.
ALLOWED = frozenset(
    {
        "dp.engine.EpochStarted",
        "dp.engine.Charged",
        "dp.engine.MatrixReleased",
        "dp.engine.Released",
        "dp.engine.Answered",
        "dp.engine.EngineConfig",
        "dp.engine.Source",
        "dp.pacing.Pacing",
        "dp.pacing.Pool",
        "dp.accountant.NoiseKind",
        "dp.domain.Domain",
        "dp.domain.Attribute",
        "dp.domain.QueryBatch",
        "dp.release.Release",
    }
)


class EventCodecError(ValueError):
    """A ledger row that does not decode: corrupt, or written by an incompatible version."""


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _lookup(name: str) -> Any:
    if name not in ALLOWED:
        raise EventCodecError(f"class {name!r} is not allowed in the ledger")
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _array(a: np.ndarray[Any, Any]) -> dict[str, Any]:
    a = np.ascontiguousarray(a)
    return {
        "__ndarray__": str(a.dtype),
        "shape": list(a.shape),
        "data": base64.b64encode(a.tobytes()).decode("ascii"),
    }


def _encode(value: Any) -> Any:
    if isinstance(value, enum.Enum):  # first: a StrEnum is also a str
        return {"__enum__": _name(type(value)), "value": value.value}
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, np.generic):
        return _encode(value.item())
    if isinstance(value, np.ndarray):
        return _array(value)
    if sp.issparse(value):
        m = sp.csr_array(value)
        return {
            "__csr__": list(m.shape),
            "data": _array(m.data),
            "indices": _array(m.indices.astype(np.int64)),
            "indptr": _array(m.indptr.astype(np.int64)),
        }
    if isinstance(value, tuple | list):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, frozenset):
        items = sorted(value, key=repr)
        return {"__frozenset__": [_encode(v) for v in items]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init
        }
        return {"__dataclass__": _name(type(value)), "fields": fields}
    raise EventCodecError(f"cannot encode a value of type {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        raise EventCodecError("bare JSON arrays are not written by the encoder")
    if not isinstance(value, dict):
        return value
    if "__float__" in value:
        return float(value["__float__"])
    if "__enum__" in value:
        return _lookup(value["__enum__"])(value["value"])
    if "__ndarray__" in value:
        raw = base64.b64decode(value["data"], validate=True)
        return (
            np.frombuffer(raw, dtype=np.dtype(value["__ndarray__"])).reshape(value["shape"]).copy()
        )
    if "__csr__" in value:
        parts = (_decode(value["data"]), _decode(value["indices"]), _decode(value["indptr"]))
        return sp.csr_array(parts, shape=tuple(value["__csr__"]))
    if "__tuple__" in value:
        return tuple(_decode(v) for v in value["__tuple__"])
    if "__frozenset__" in value:
        return frozenset(_decode(v) for v in value["__frozenset__"])
    if "__dataclass__" in value:
        cls = _lookup(value["__dataclass__"])
        return cls(**{k: _decode(v) for k, v in value["fields"].items()})
    raise EventCodecError("unknown tagged value in a ledger row")


def encode(event: Any) -> tuple[str, str]:
    """``(kind, payload)``: the event's class name and its JSON text."""
    if not dataclasses.is_dataclass(event) or isinstance(event, type):
        raise EventCodecError("an event must be a dataclass instance")
    return type(event).__name__, json.dumps(_encode(event), separators=(",", ":"), allow_nan=False)


def decode(payload: str) -> Any:
    """The event encoded in ``payload`` (raises EventCodecError when it is not one)."""
    try:
        return _decode(json.loads(payload))
    except EventCodecError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise EventCodecError(f"a ledger row does not decode: {type(exc).__name__}") from None
