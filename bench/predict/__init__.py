"""Template prediction on the Crossfilter flights traces (see run.py)."""
