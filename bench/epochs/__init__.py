"""Whole-table epochs: pinning a large table, ``lapras epoch start``, and fresh answers over a
large marginal (``python -m bench.epochs``; see its module doc)."""
