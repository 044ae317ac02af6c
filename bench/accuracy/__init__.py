"""Accuracy benchmark: the paper's Table 2 setting on the Adult age histogram.

Run as ``python -m bench.accuracy``. The matrices are small (73 cells), so multi-threaded BLAS
only adds contention on a shared 2-core machine: one thread unless the caller says otherwise.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
