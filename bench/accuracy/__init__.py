"""Accuracy benchmark: the paper's Table 2 setting on the Adult age histogram."""
