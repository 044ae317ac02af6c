"""Accuracy benchmarks: the paper's Table 2 setting on the Adult age histogram
(``python -m bench.accuracy``, ``run.py``), and statements with one aggregate or several beside
SmartNoise SQL and Tumult Analytics (``python -m bench.accuracy statements``, ``statements.py``).

The matrices are small (73 cells), so multi-threaded BLAS only adds contention on a shared 2-core
machine: one thread unless the caller says otherwise.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
