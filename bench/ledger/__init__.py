"""Benchmark of the durable privacy ledger (issue 6): ``python -m bench.ledger``."""
