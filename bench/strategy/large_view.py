"""Large-view benchmark: the Adult "demographics" view (62,160 cells) and its dashboard.

    python -m bench.strategy.large_view            # 3 repetitions, one BLAS thread
    python -m bench.strategy.large_view --threads=2

The 43 predicted queries are the dashboard's statements (``sql_fixtures/adult/dashboard.sql``)
lifted to the view's domain exactly as the proxy does (``rewriter`` + ``proxy.epochs.lift``).
Every column of that workload is distinct (sums of age and GROUP BYs over every attribute), so
merging identical columns does nothing here; the symmetry phase (docs/mm.md §3b) and the
support-proportional release path (§4b) are what make it fast. Timed: ``optimize_strategy``
(default 0.1% certified gap), ``measure`` (Release construction), and ``estimate`` /
``can_answer`` of the dashboard's 1-row queries and of a 10-row GROUP BY restricted to a few
ages, from dense rows (what the engine passes) and from CSR rows.
"""

from __future__ import annotations

import os
import sys

_THREADS = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, _THREADS)

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import rewriter  # noqa: E402
import sql_fixtures  # noqa: E402
from dp.domain import QueryBatch  # noqa: E402
from dp.noise import SeededSampler  # noqa: E402
from dp.release import measure  # noqa: E402
from dp.strategy import optimize_strategy, reduce_domain, symmetry_classes  # noqa: E402
from proxy.epochs import lift  # noqa: E402


def _statements() -> list[str]:
    text = (sql_fixtures.path("adult") / "dashboard.sql").read_text()
    out = []
    for chunk in text.split(";"):
        lines = [ln for ln in chunk.splitlines() if not ln.strip().startswith("--")]
        stmt = "\n".join(lines).strip()
        if stmt:
            out.append(stmt)
    return out


def _per_call_ms(fn: object, arg: object, reps: int = 200) -> float:
    fn(arg)  # type: ignore[operator]
    t = time.perf_counter()
    for _ in range(reps):
        fn(arg)  # type: ignore[operator]
    return (time.perf_counter() - t) / reps * 1e3


def main() -> None:
    schema = rewriter.load_schema(sql_fixtures.path("adult") / "lapras.toml")
    dom = next(v.domain for v in schema.tables["adult"].views if v.name == "demographics")
    batches = [lift(rewriter.classify(s, schema)[0].plan.batch, dom) for s in _statements()]
    w = QueryBatch.stack(batches).dense()
    w_r, _ = reduce_domain(w)
    _, n_c = symmetry_classes(w_r)
    print(
        f"cells {w.shape[1]}, |P| = {w.shape[0]}, rank {np.linalg.matrix_rank(w)}, "
        f"distinct columns {w_r.shape[1]}, symmetry classes {n_c}"
    )
    x = np.random.default_rng(0).poisson(0.5, w.shape[1]).astype(float)
    opt, mea = [], []
    for rep in range(3):
        t0 = time.perf_counter()
        s = optimize_strategy(w)
        t1 = time.perf_counter()
        rel = measure(s, x, 1.0, SeededSampler(rep))
        t2 = time.perf_counter()
        opt.append(t1 - t0)
        mea.append(t2 - t1)
    print(
        f"optimize_strategy: median {statistics.median(opt):.2f} s (max {max(opt):.2f} s), "
        f"gap {s.gap:.1e}; measure (Release): median {statistics.median(mea):.2f} s"
    )
    one = [b.dense() for b in batches if b.num_queries == 1]
    ten = np.vstack(one[:10])
    small = [q for q in one if np.count_nonzero(q) <= 5000]
    for name, q in [
        ("1-row, smallest support", min(one, key=np.count_nonzero)),
        ("1-row, <= 5000 cells (median)", small[len(small) // 2] if small else one[0]),
        ("10 rows (first ten 1-row counts)", ten),
    ]:
        nnz = int(np.count_nonzero(q))
        print(
            f"{name}: nnz {nnz}: estimate {_per_call_ms(rel.estimate, q):.3f} ms dense, "
            f"{_per_call_ms(rel.estimate, sp.csr_matrix(q)):.3f} ms CSR; "
            f"can_answer {_per_call_ms(rel.can_answer, q):.3f} ms"
        )


if __name__ == "__main__":
    main()
