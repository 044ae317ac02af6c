import os

# one BLAS thread per worker process (the workers are the parallelism); set before numpy loads
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from bench.predict.run import main  # noqa: E402

raise SystemExit(main())
