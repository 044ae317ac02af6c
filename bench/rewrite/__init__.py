"""Rewriter benchmark: classify + reduce latency of typical dashboard queries."""
