"""The prediction benchmark of issue 16: real dashboard logs, three scenarios, four P's.

``python -m bench.predict [--quick]``; see :mod:`bench.predict.run` (method, scenarios, runs),
:mod:`bench.predict.replay` (traces to SQL) and :mod:`bench.predict.datasets` (the synthesised
tables). Imports nothing at package level (``__main__`` sets the BLAS threads first).
"""
