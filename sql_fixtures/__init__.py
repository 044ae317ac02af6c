"""Datasets shipped with LAPRAS proxy: DDL, loaders and their declarations (lapras.toml).

Each dataset lives in its own folder (``adult/``...). Loaders take an open psycopg connection
and load with ``COPY`` (never row by row). The folder path of a dataset is
``sql_fixtures.path(name)``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parent


def path(name: str) -> Path:
    """The folder of a shipped dataset (for example ``path("adult") / "lapras.toml"``)."""
    return ROOT / name
