"""Imported first by tests/conftest.py, before numpy: one BLAS thread per process.

The suite's processes (pytest, and the proxies and CLIs it starts, which inherit the
environment) share a 2-core machine, where OpenBLAS' default of a thread per core made
numpy-heavy tests 5-20x slower. A value the caller set is kept.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
