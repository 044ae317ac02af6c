"""Datasets shipped with LAPRAS proxy: DDL, loaders and their declarations (lapras.toml).

Each dataset lives in its own folder (``adult/``...). Loaders take an open psycopg connection
and load with ``COPY`` (never row by row). The folder path of a dataset is
``sql_fixtures.path(name)``.
"""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent
#: The datasets that can be loaded by name (``lapras provision --load``), each a package here
#: with ``TABLE``, ``DECLARATION`` and ``load(conn)``.
DATASETS = ("adult", "gowalla")


def path(name: str) -> Path:
    """The folder of a shipped dataset (for example ``path("adult") / "lapras.toml"``)."""
    return ROOT / name


def dataset(name: str) -> Any:
    """The module of a shipped dataset (one of :data:`DATASETS`)."""
    if name not in DATASETS:
        raise ValueError(f"no shipped dataset {name!r} (shipped: {', '.join(DATASETS)})")
    return importlib.import_module(f"sql_fixtures.{name}")


def copy_load(conn: Any, *, ddl: str, table: str, csv_text: str) -> int:
    """Run ``ddl`` (CREATE TABLE IF NOT EXISTS ...), COPY ``csv_text`` into ``table`` when it is
    empty, and return its row count. ``conn``: a psycopg 3 connection; the load commits."""
    with conn.cursor() as cur:
        cur.execute(ddl)
        cur.execute(f"SELECT count(*) FROM {table}")
        (count,) = cur.fetchone()
        if count == 0:
            with cur.copy(f"COPY {table} FROM STDIN WITH (FORMAT csv)") as copy:
                buf = io.StringIO(csv_text)
                while chunk := buf.read(1 << 20):
                    copy.write(chunk)
            cur.execute(f"ANALYZE {table}")
            cur.execute(f"SELECT count(*) FROM {table}")
            (count,) = cur.fetchone()
    conn.commit()
    return int(count)
