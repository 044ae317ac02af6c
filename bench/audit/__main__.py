import os

# One BLAS thread per process (the trials run in parallel processes; the matrices are small).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from bench.audit.run import main  # noqa: E402

raise SystemExit(main())
