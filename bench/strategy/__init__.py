"""Strategy optimisation benchmark: ``python -m bench.strategy [--quick]`` (see __main__)."""
