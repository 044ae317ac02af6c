"""An epoch's answers map as the epoch grows: answering and replaying a long ledger, with the
map copied whole at every event (*before*) and as a persistent map (*after*,
``dp.persistent``), in alternating rounds in one process
(``python -m bench.ledger --replay [--answers N] [--rounds R] [--write-docs]``).

Each round and variant runs the engine in memory (``dp.engine.answer``, no database: what is
measured is the engine's own work per event, which the proxy does in its worker thread for
every answer and at every restart): an epoch over one attribute of 2,000 cells, ``reuse =
false``, epsilon large enough that nothing is refused, N distinct range counts each answered
fresh (a ``Charged`` and a ``Released`` event each; seeded noise), timed per quarter of the
stream, then ``dp.engine.fold`` of the whole ledger (a restart's replay, and what a second
worker does to catch up). *before* patches ``dp.engine._with_answer`` back to the dict copy
it replaced (``dict.copy`` of the map, then one entry set) for its rounds only.

A second part runs default mode (``reuse``): fresh releases over one marginal of 296 cells,
each combined with the marginal's earlier releases by generalised least squares
(``dp.engine.StoredInference``); *before* patches ``StoredInference.add`` back to decomposing
the information matrix at every release added, *after* decomposes a value when it is first
asked a question (and a release's answer and its event share one value).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from dp import engine
from dp.domain import Domain, QueryBatch
from dp.noise import SeededSampler

CELLS = 2000
#: Statements per group in the default-mode part's grouped run (a group commit's size under
#: 50 clients).
GROUP = 50
BEGIN, END = "<!-- replay:begin -->", "<!-- replay:end -->"
HEADING = "## Ledger: an epoch's answers map as it grows (`bench/ledger --replay`)"


@dataclass
class Times:
    quarters: list[list[float]] = field(default_factory=lambda: [[], [], [], []])
    fold: list[float] = field(default_factory=list)
    gls: list[float] = field(default_factory=list)
    gls_fold: list[float] = field(default_factory=list)
    grouped: list[float] = field(default_factory=list)


def _copied_answer(state: engine.EngineState, key: str, ans: Any) -> Any:
    """The map as it was updated before: copied whole, one entry set."""
    d = engine._copied(state.answers)
    d[key] = ans
    return MappingProxyType(d)


def _eager_add(self: engine.StoredInference, a: Any, y: Any, var: Any) -> Any:
    """The GLS update as it was before: decomposed at once, every time a release is added."""
    aw = a / var[:, None]
    out = engine.StoredInference(self.info + aw.T @ a, self.h + aw.T @ y)
    out._solve()
    return out


@contextmanager
def _variant(name: str) -> Iterator[None]:
    if name == "after":
        yield
        return
    saved = engine._with_answer, engine.StoredInference.add
    engine._with_answer = _copied_answer  # type: ignore[assignment]
    engine.StoredInference.add = _eager_add  # type: ignore[method-assign]
    try:
        yield
    finally:
        engine._with_answer, engine.StoredInference.add = saved  # type: ignore[method-assign]


def _batches(n: int) -> Iterator[QueryBatch]:
    dom = Domain.of(("cell", CELLS))
    k = 0
    for lo in range(CELLS):
        for hi in range(lo + 1, CELLS + 1):
            if k == n:
                return
            v = np.zeros(CELLS)
            v[lo:hi] = 1.0
            yield QueryBatch.from_dense(dom, [v])
            k += 1


def _round(n: int, batches: list[QueryBatch]) -> tuple[list[float], float]:
    dom = batches[0].domain
    x = np.ones(CELLS)
    cfg = engine.EngineConfig(epsilon=1e6, delta=1e-6, stream_length=10 * n, reuse=False)
    state, events = engine.start(cfg, dom, None, x, SeededSampler(1))
    ledger = list(events)
    sampler = SeededSampler(2)
    quarters = []
    for q in range(4):
        t = time.perf_counter()
        for b in batches[q * n // 4 : (q + 1) * n // 4]:
            state, d, r = engine.answer(state, b, x, sampler)
            ledger += [*d.events, *r.events]
        quarters.append((time.perf_counter() - t) / (n // 4))
    t = time.perf_counter()
    again = engine.fold(ledger)
    took = time.perf_counter() - t
    assert dict(again.answers) == dict(state.answers) and len(again.answers) == n
    return quarters, took


def _gls_round(n: int) -> tuple[float, float, float]:
    """Default mode: ``n`` fresh releases over one marginal of 296 cells (each a random 0/1
    query, outside the span of the ones before it, so each is answered fresh and combined by
    GLS with the marginal's earlier releases): s per answer one at a time, the ledger's
    replay (s), and s per answer in groups of :data:`GROUP`."""
    dom = Domain.of(("age", 74), ("sex", 2), ("income", 2))
    x = np.ones(dom.size)
    rng = np.random.default_rng(7)
    cfg = engine.EngineConfig(epsilon=1e6, delta=1e-6, stream_length=10 * n)
    state, events = engine.start(cfg, dom, None, x, SeededSampler(1))
    ledger = list(events)
    sampler = SeededSampler(2)
    batches = [QueryBatch.from_dense(dom, [rng.integers(0, 2, dom.size)]) for _ in range(n)]
    t = time.perf_counter()
    for b in batches:
        state, d, r = engine.answer(state, b, x, sampler)
        assert d.kind is engine.DecisionKind.FRESH
        ledger += [*d.events, *r.events]
    per = (time.perf_counter() - t) / n
    t = time.perf_counter()
    engine.fold(ledger)
    folded = time.perf_counter() - t
    # the same in groups of GROUP, as the proxy's group commit makes them (release_all)
    state, _ = engine.start(cfg, dom, None, x, SeededSampler(1))
    t = time.perf_counter()
    for g in range(0, n, GROUP):
        decisions = []
        for b in batches[g : g + GROUP]:
            d = engine.decide(state, b)
            assert d.kind is engine.DecisionKind.FRESH
            for ev in d.events:
                state = engine.apply(state, ev)
            decisions.append(d)
        _, state = engine.release_all(state, decisions, x, sampler)
    return per, folded, (time.perf_counter() - t) / n


def run(n: int, rounds: int, gls: int = 250) -> str:
    batches = list(_batches(n))
    times = {"before": Times(), "after": Times()}
    began = time.monotonic()
    for r in range(rounds):
        for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
            with _variant(name):
                quarters, took = _round(n, batches)
                per, gls_fold, grouped = _gls_round(gls)
            for i, q in enumerate(quarters):
                times[name].quarters[i].append(q)
            times[name].fold.append(took)
            times[name].gls.append(per)
            times[name].gls_fold.append(gls_fold)
            times[name].grouped.append(grouped)
            print(f"round {r + 1}/{rounds} {name}: fold {took:.2f} s", flush=True)
    elapsed = time.monotonic() - began
    med = statistics.median
    head = "| | " + " | ".join(
        f"ms per answer, answers {q * n // 4:,}-{(q + 1) * n // 4:,}" for q in range(4)
    )
    lines = [
        f"Command: `python -m bench.ledger --replay --answers {n} --rounds {rounds}` "
        f"({elapsed:.0f} s; one process, the engine in memory: no database; medians over "
        f"{rounds} rounds alternating before / after; 2 cores shared with other work).",
        "",
        head + f" | replay of the ledger ({2 * n + 1:,} events), s |",
        "|---|" + "---:|" * 5,
    ]
    for name, label in (("before", "before (dict copied per event)"), ("after", "after")):
        t = times[name]
        cells = [f"{1000 * med(q):.3f}" for q in t.quarters]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {med(t.fold):.2f} |")
    ratio = med(times["before"].fold) / med(times["after"].fold)
    lines += ["", f"Replay, before / after: {ratio:.1f}x.", ""]
    lines += [
        f"Default mode (GLS over a marginal's releases): {gls} fresh releases over one marginal "
        "of 296 cells (age x sex x income), each a random 0/1 query outside the span of those "
        "before it; *before* decomposed the marginal's information matrix at every release "
        "added (twice per release: its answer, then its event), *after* at the first "
        "question asked of each value; in groups (`dp.engine.release_all`, as group commit "
        f"makes them, {GROUP} statements each), *after* also answers a group's releases over "
        "the marginal from one system:",
        "",
        f"| | ms per answer, one at a time | ms per answer, in groups of {GROUP} "
        f"| replay of the ledger ({2 * gls + 1} events), s |",
        "|---|---:|---:|---:|",
    ]
    for name in ("before", "after"):
        t = times[name]
        lines.append(
            f"| {name} | {1000 * med(t.gls):.2f} | {1000 * med(t.grouped):.2f} "
            f"| {med(t.gls_fold):.2f} |"
        )
    return "\n".join(lines)
