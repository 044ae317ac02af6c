"""Engine events <-> JSON-safe dictionaries, so the proxy can persist an epoch's ledger.

``encode_event(ev)`` returns a dict of str / int / float / bool / None / list / dict only
(``json.dumps`` round-trips every float exactly); ``decode_event(d)`` rebuilds the event, and
``dp.engine.fold`` of the decoded events gives the same state. A decoded batch's key is
recomputed and checked against the stored one, so a ledger edited by hand is detected.
Pure: no I/O.

>>> from dp.domain import Domain
>>> from dp.engine import EngineConfig, EpochStarted
>>> ev = EpochStarted(config=EngineConfig(epsilon=1.0, delta=1e-3, stream_length=10),
...                   domain=Domain.of(("age", 3)), predicted=())
>>> decode_event(encode_event(ev)) == ev
True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from dp.accountant import NoiseKind
from dp.domain import Domain, QueryBatch
from dp.engine import (
    Answered,
    Charged,
    EngineConfig,
    EpochStarted,
    Event,
    MatrixReleased,
    Released,
    Source,
)
from dp.errors import InternalError
from dp.marginals import BlockRelease, Reduction
from dp.pacing import Pacing, Pool
from dp.release import Release
from dp.units import Contribution

#: The options of an epoch's configuration (EngineConfig's init fields), in order.
CONFIG_FIELDS = (
    "epsilon",
    "delta",
    "stream_length",
    "split",
    "allocation",
    "mode",
    "accountant",
    "warmup",
    "static_pacing",
    "eps_min",
    "reuse",
    "reallocate",
    "reserve_pacing",
    "expected_fresh",
)
_PACING_FIELDS = ("warmup_pool", "bad_pool", "reserve", "b_est", "k", "per_query", "in_reserve")


def _floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def _domain(d: Domain) -> list[list[Any]]:
    return [[a.name, a.size] for a in d.attributes]


def _batch(b: QueryBatch) -> dict[str, Any]:
    m = b.matrix
    return {
        "domain": _domain(b.domain),
        "shape": [int(m.shape[0]), int(m.shape[1])],
        "indptr": [int(i) for i in m.indptr],
        "indices": [int(i) for i in m.indices],
        "data": _floats(m.data),
        "key": b.key,
    }


def _unbatch(d: dict[str, Any]) -> QueryBatch:
    dom = Domain.of(*((str(n), int(s)) for n, s in d["domain"]))
    m = sp.csr_array(
        (
            np.asarray(d["data"], dtype=np.float64),
            np.asarray(d["indices"], dtype=np.int64),
            np.asarray(d["indptr"], dtype=np.int64),
        ),
        shape=tuple(d["shape"]),
    )
    batch = QueryBatch(dom, m)
    if batch.key != d["key"]:
        raise InternalError("a stored query does not match its key")
    return batch


def _predicted(d: Any) -> tuple[QueryBatch, ...]:
    """P as stored: a list of batches (an older ledger: one batch, or null)."""
    if d is None:
        return ()
    if isinstance(d, dict):
        return (_unbatch(d),)
    return tuple(_unbatch(b) for b in d)


def _release(r: Release) -> dict[str, Any]:
    return {
        "matrix": [_floats(row) for row in r.matrix],
        "y": _floats(r.y),
        "noise_variance": _floats(r.noise_variance),
    }


def _unrelease(d: dict[str, Any]) -> Release:
    return Release(
        matrix=np.asarray(d["matrix"], dtype=np.float64),
        y=np.asarray(d["y"], dtype=np.float64),
        noise_variance=np.asarray(d["noise_variance"], dtype=np.float64),
    )


def _block(b: BlockRelease) -> dict[str, Any]:
    red = b.reduction
    return {
        "domain": _domain(red.domain),
        "groups": None if red.is_identity else [int(g) for g in red.groups],
        **_release(b.release),
    }


def _unblock(d: dict[str, Any]) -> BlockRelease:
    dom = Domain.of(*((str(n), int(s)) for n, s in d["domain"]))
    if d["groups"] is None:
        red = Reduction.identity(dom)
    else:
        groups = np.asarray(d["groups"], dtype=np.intp)
        if groups.shape != (dom.size,) or int(np.min(groups)) < -1:
            raise InternalError("a stored block does not match its domain")
        counts = np.bincount(groups[groups >= 0]).astype(np.float64)
        red = Reduction(dom, groups, counts)
    return BlockRelease(red, _unrelease(d))


def _pacing(p: Pacing) -> dict[str, Any]:
    return {f: getattr(p, f) for f in _PACING_FIELDS}


def _config(c: EngineConfig) -> dict[str, Any]:
    out = {f: getattr(c, f) for f in CONFIG_FIELDS}
    if not isinstance(out["split"], str):
        out["split"] = list(out["split"])
    out["contribution"] = [c.contribution.rows, c.contribution.per_cell]
    return out


def encode_config(config: EngineConfig) -> dict[str, Any]:
    """The configuration options of an epoch as a JSON-safe dict (what an admin reads)."""
    return _config(config)


def encode_event(ev: Event) -> dict[str, Any]:
    """A JSON-safe dict for one engine event (``type`` names the event)."""
    if isinstance(ev, EpochStarted):
        return {
            "type": "epoch_started",
            "config": _config(ev.config),
            "domain": _domain(ev.domain),
            "predicted": [_batch(b) for b in ev.predicted],
        }
    if isinstance(ev, Charged):
        return {
            "type": "charged",
            "position": ev.position,
            "b": ev.b,
            "key": ev.key,
            "pool": ev.pool.value,
            "amount": ev.amount,
            "noise": ev.noise.value,
            "scale": ev.scale,
            "sensitivity": ev.sensitivity,
            "pacing": _pacing(ev.pacing),
        }
    if isinstance(ev, MatrixReleased):
        if ev.legacy is not None:
            return {"type": "matrix_released", **_release(ev.legacy)}
        return {"type": "matrix_released", "blocks": [_block(b) for b in ev.blocks]}
    if isinstance(ev, Released):
        return {
            "type": "released",
            "position": ev.position,
            "key": ev.key,
            "batch": None if ev.batch is None else _batch(ev.batch),
            "measurement": list(ev.measurement),
            "noise_variance": ev.noise_variance,
            "answers": list(ev.answers),
            "std_errors": list(ev.std_errors),
        }
    if isinstance(ev, Answered):
        return {
            "type": "answered",
            "position": ev.position,
            "key": ev.key,
            "source": ev.source.value,
            "answers": list(ev.answers),
            "std_errors": list(ev.std_errors),
            "b": ev.b,
            "pacing": None if ev.pacing is None else _pacing(ev.pacing),
        }
    raise InternalError("unknown engine event")


def decode_event(d: dict[str, Any]) -> Event:
    """The event encoded by :func:`encode_event`."""
    kind = d.get("type")
    if kind == "epoch_started":
        cfg = dict(d["config"])
        if not isinstance(cfg["split"], str):
            cfg["split"] = tuple(float(f) for f in cfg["split"])
        rows, per_cell = cfg.get("contribution", (1, 1))  # older ledgers: row level
        cfg["contribution"] = Contribution(int(rows), int(per_cell))
        return EpochStarted(
            config=EngineConfig(**cfg),
            domain=Domain.of(*((str(n), int(s)) for n, s in d["domain"])),
            predicted=_predicted(d["predicted"]),
        )
    if kind == "charged":
        return Charged(
            position=int(d["position"]),
            b=int(d["b"]),
            key=str(d["key"]),
            pool=Pool(d["pool"]),
            amount=float(d["amount"]),
            noise=NoiseKind(d["noise"]),
            scale=float(d["scale"]),
            sensitivity=float(d["sensitivity"]),
            pacing=Pacing(**d["pacing"]),
        )
    if kind == "matrix_released":
        if "blocks" not in d:  # an older ledger: one release over the epoch's domain
            return MatrixReleased(blocks=(), legacy=_unrelease(d))
        return MatrixReleased(blocks=tuple(_unblock(b) for b in d["blocks"]))
    if kind == "released":
        return Released(
            position=int(d["position"]),
            key=str(d["key"]),
            batch=None if d["batch"] is None else _unbatch(d["batch"]),
            measurement=tuple(float(v) for v in d["measurement"]),
            noise_variance=float(d["noise_variance"]),
            answers=tuple(float(v) for v in d["answers"]),
            std_errors=tuple(float(v) for v in d["std_errors"]),
        )
    if kind == "answered":
        return Answered(
            position=int(d["position"]),
            key=str(d["key"]),
            source=Source(d["source"]),
            answers=tuple(float(v) for v in d["answers"]),
            std_errors=tuple(float(v) for v in d["std_errors"]),
            b=None if d["b"] is None else int(d["b"]),
            pacing=None if d["pacing"] is None else Pacing(**d["pacing"]),
        )
    raise InternalError("unknown engine event in the ledger")
