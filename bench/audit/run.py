"""Running the audit: trials in chunks (in parallel), the bounds, the table, the docs block."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import textwrap
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.audit.cases import BY_NAME, CASES, DELTA, Case, Claim, Prepared, ScaledSampler
from bench.audit.stats import Bound, audit
from bench.docs import write_block
from dp.domain import FloatArray
from dp.noise import Sampler, SecureSampler, SeededSampler

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- audit:begin -->", "<!-- audit:end -->"
HEADING = "## Empirical privacy audit (`bench/audit`)"

#: Trials per dataset of the cheapest cases (the others run ``trials // cost``).
DEFAULT_TRIALS = 30_000
#: No case runs fewer trials per dataset than this.
MIN_TRIALS = 200
#: Trials per task: the unit of parallel work, and of seeding (one seed per chunk).
CHUNK = 1_000


@dataclass(frozen=True, slots=True)
class Result:
    case: Case
    claim: Claim
    bound: Bound
    trials: int
    neighbours: str
    mu_eff: float
    #: Time spent in the trials, summed over the workers (both datasets).
    seconds: float

    @property
    def caught(self) -> bool:
        """The lower bound exceeds the claim: the mechanism is not as private as it says."""
        return self.bound.eps_lb > self.claim.epsilon


@functools.cache
def prepared(name: str, delta: float) -> Prepared:
    """The case's mechanism for epochs of ``delta``, built once per process."""
    return BY_NAME[name].build(delta)


def chunk_seed(seed: int, name: str, dataset: int, chunk: int) -> int:
    """The seed of one chunk of trials: independent across cases, datasets and chunks, and the
    same whatever the number of workers."""
    ss = np.random.SeedSequence([seed, zlib.crc32(name.encode()), dataset, chunk])
    return int(ss.generate_state(1, np.uint64)[0])


def run_chunk(
    name: str, delta: float, dataset: int, chunk: int, size: int, seed: int
) -> tuple[FloatArray, float]:
    """``size`` trials of case ``name`` on dataset 0 (``D``) or 1 (``D'``): the statistics and
    the seconds they took."""
    case = BY_NAME[name]
    prep = prepared(name, delta)
    sampler: Sampler = (
        SecureSampler() if case.secure else SeededSampler(chunk_seed(seed, name, dataset, chunk))
    )
    if case.noise_factor != 1.0:
        sampler = ScaledSampler(sampler, case.noise_factor)
    pin = prep.pins[dataset]
    t0 = time.perf_counter()
    out = np.fromiter((prep.trial(pin, sampler) for _ in range(size)), np.float64, size)
    return out, time.perf_counter() - t0


def trials_of(case: Case, trials: int) -> int:
    return max(MIN_TRIALS, trials // case.cost)


class _Inline(Executor):
    """Runs each task at once, in this process (``jobs = 1``: tests, debugging)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        f: Future[object] = Future()
        f.set_result(fn(*args, **kwargs))
        return f


def run(
    cases: Sequence[Case] = CASES,
    *,
    trials: int = DEFAULT_TRIALS,
    seed: int = 0,
    alpha: float = 0.05,
    delta: float = DELTA,
    jobs: int = 1,
) -> list[Result]:
    """Audit ``cases`` with epochs of ``delta``; ``trials`` per dataset (``trials // cost`` for
    the costlier cases)."""
    executor: Executor = ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else _Inline()
    with executor:
        pending = []
        for case in cases:
            n = trials_of(case, trials)
            sizes = [min(CHUNK, n - i) for i in range(0, n, CHUNK)]
            futures = [
                [
                    executor.submit(run_chunk, case.name, delta, ds, k, size, seed)
                    for k, size in enumerate(sizes)
                ]
                for ds in (0, 1)
            ]
            pending.append((case, n, futures))
        results = []
        for case, n, futures in pending:
            parts = [[f.result() for f in fs] for fs in futures]
            t_d, t_dp = (np.concatenate([p[0] for p in ps]) for ps in parts)
            seconds = sum(p[1] for ps in parts for p in ps)
            prep = prepared(case.name, delta)
            bound = audit(t_d, t_dp, delta=prep.claim.delta, alpha=alpha)
            results.append(
                Result(
                    case=case,
                    claim=prep.claim,
                    bound=bound,
                    trials=n,
                    neighbours=prep.neighbours,
                    mu_eff=prep.mu_eff,
                    seconds=seconds,
                )
            )
    return results


def consistent(results: Sequence[Result]) -> bool:
    """Every production mechanism's bound below its claim, every control's above."""
    return all(r.caught == r.case.control for r in results)


def _claim_text(c: Claim) -> str:
    return f"{c.epsilon:.3f} (pure)" if c.delta == 0 else f"{c.epsilon:.3f} at {c.delta:g}"


def table(results: Sequence[Result], alpha: float) -> str:
    conf = f"{100 * (1 - alpha):g}%"
    lines = [
        f"| mechanism | claimed epsilon (at delta) | epsilon lower bound ({conf}) | "
        "trials per dataset | ms per trial | caught |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        ms = 1e3 * r.seconds / (2 * r.trials)
        lines.append(
            f"| {r.case.title} | {_claim_text(r.claim)} | {r.bound.eps_lb:.3f} | "
            f"{r.trials:,} | {ms:.2f} | {'yes' if r.caught else 'no'} |"
        )
    return "\n".join(lines)


def details(results: Sequence[Result]) -> str:
    out = []
    for r in results:
        b = r.bound
        num, den = ("D", "D'") if b.first == 0 else ("D'", "D")
        out.append(
            f"- {r.case.title}: {r.case.setting}. Claim: {r.claim.basis}. Neighbours: "
            f"{r.neighbours} (statistic shift mu_eff = {r.mu_eff:.3g}). Test: "
            f"P[{b.event.replace('t', f'{b.threshold:.4g}')} | {num}] vs the same on {den}, "
            f"event chosen on {b.n_selection:,} trials per dataset, counted on {b.n:,}: "
            f"{b.k_num:,} vs {b.k_den:,}."
        )
    return "\n".join(textwrap.fill(p, width=100, subsequent_indent="  ") for p in out)


def block_text(results: Sequence[Result], *, command: str, seconds: float, alpha: float) -> str:
    cores = os.cpu_count()
    return (
        f"Command: `{command}` ({seconds:.0f} s on {cores} cores).\n\n"
        f"{table(results, alpha)}\n\n{details(results)}"
    )


def write_docs(body: str, path: Path = DOCS) -> None:
    """Put ``body`` between ``<!-- audit:begin -->`` and ``<!-- audit:end -->`` in ``path``
    (:func:`bench.docs.write_block`)."""
    write_block(path, body, begin=BEGIN, end=END, heading=HEADING)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.audit",
        description="Empirical privacy audit: epsilon lower bounds of the engine's mechanisms.",
    )
    ap.add_argument(
        "--trials",
        type=int,
        default=DEFAULT_TRIALS,
        help=f"trials per dataset of the online cases (default {DEFAULT_TRIALS:,}); the Matrix "
        "Mechanism, whole-epoch and SecureSampler cases run a fraction of them",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the SeededSampler trials")
    ap.add_argument("--alpha", type=float, default=0.05, help="1 - confidence (default 0.05)")
    ap.add_argument(
        "--delta",
        type=float,
        default=DELTA,
        help=f"every epoch's delta, at which its claims are audited (default {DELTA:g})",
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--cases", default=None, help=f"comma-separated, of: {', '.join(BY_NAME)}")
    ap.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.trials < 8:
        ap.error("--trials must be at least 8")
    if not 0.0 < args.delta < 1.0:
        ap.error("--delta must be strictly between 0 and 1")
    if not 0.0 < args.alpha < 1.0:
        ap.error("--alpha must be strictly between 0 and 1")
    names = list(BY_NAME) if args.cases is None else args.cases.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    t0 = time.perf_counter()
    results = run(
        [BY_NAME[n] for n in names],
        trials=args.trials,
        seed=args.seed,
        alpha=args.alpha,
        delta=args.delta,
        jobs=args.jobs,
    )
    seconds = time.perf_counter() - t0
    flags = [f"--trials {args.trials}", f"--seed {args.seed}"]
    if args.alpha != 0.05:
        flags.append(f"--alpha {args.alpha:g}")
    if args.delta != DELTA:
        flags.append(f"--delta {args.delta:g}")
    if args.cases is not None:
        flags.append(f"--cases {args.cases}")
    command = " ".join(["python -m bench.audit", *flags])
    print(table(results, args.alpha))
    print()
    print(details(results))
    print(f"\n{seconds:.1f} s", file=sys.stderr)
    ok = consistent(results)
    if not ok:
        print(
            "AUDIT FAILED: a production mechanism's lower bound exceeds its claim, or a "
            "control was not caught",
            file=sys.stderr,
        )
    if args.write_docs:
        write_docs(block_text(results, command=command, seconds=seconds, alpha=args.alpha))
        print(f"wrote {DOCS.relative_to(ROOT)}", file=sys.stderr)
    return 0 if ok else 1
