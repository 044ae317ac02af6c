"""SmartNoise Synth worker of ``bench.accuracy.marginals``: runs in its own virtual environment.

Not imported by the project: ``bench.accuracy.marginals`` starts it with the interpreter of
``bench/out/peers/smartnoise-synth`` (smartnoise-synth 1.0.8 needs smartnoise-sql, hence
opendp < 0.15, and mbi with JAX; the project runs a newer opendp). It reads one JSON request per
line on stdin and writes one JSON answer per line on stdout (anything the libraries print goes
to stderr):

- first ``{"columns": [[name, cells], ...]}``: the public domain, one categorical column per
  declared attribute with its number of cells; answers ``{"version"}``;
- then ``{"synth": "mst" | "aim", "epsilon", "delta", "seed", "data", "out", "options"}``: the
  rows of ``data`` (an ``.npy`` matrix of cell indices, one column per attribute) are fitted
  with ``Synthesizer.create(synth, epsilon=, delta=, **options)``; as many synthetic rows as
  the input has are sampled and saved to ``out`` (``.npy``, same layout). Answers
  ``{"seconds", "rows"}`` or ``{"error"}``.

The transformer is fitted on a *public* frame holding every declared cell of every column, not
on the data, so the synthesizer's domain is the declaration's (no budget spent on it, nothing
learnt from the data outside the mechanism).
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib import metadata
from typing import Any


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:300]


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the libraries print goes to stderr, not into the answers
    import numpy as np
    import pandas as pd
    from snsynth import Synthesizer
    from snsynth.transform.label import LabelTransformer
    from snsynth.transform.table import TableTransformer

    hello = json.loads(sys.stdin.readline())
    columns = [(str(n), int(k)) for n, k in hello["columns"]]
    names = [n for n, _ in columns]
    longest = max(k for _, k in columns)
    public = pd.DataFrame({n: np.arange(longest) % k for n, k in columns})
    out.write(json.dumps({"version": metadata.version("smartnoise-synth")}) + "\n")
    for line in sys.stdin:
        req: dict[str, Any] = json.loads(line)
        t0 = time.perf_counter()
        try:
            np.random.seed(int(req["seed"]) % (2**32))
            data = pd.DataFrame(np.load(req["data"]), columns=names)
            transformer = TableTransformer([LabelTransformer(nullable=False) for _ in names])
            transformer.fit(public)
            synth = Synthesizer.create(
                req["synth"],
                epsilon=float(req["epsilon"]),
                delta=float(req["delta"]),
                **req.get("options", {}),
            )
            synth.fit(data, transformer=transformer, preprocessor_eps=0.0)
            rows = synth.sample(len(data))
            arr = np.asarray(pd.DataFrame(rows, columns=names).to_numpy(), dtype=np.int64)
            np.save(req["out"], arr)
            out.write(
                json.dumps({"seconds": time.perf_counter() - t0, "rows": int(arr.shape[0])}) + "\n"
            )
        except Exception as e:  # reported, and the benchmark goes on without this fit
            out.write(json.dumps({"error": _short(e)}) + "\n")


if __name__ == "__main__":
    main()
