"""Stored DP answers while another client sends big statements: ``python -m bench.big_statements``."""
