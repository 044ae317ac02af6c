"""Datasets shipped with LAPRAS proxy: DDL, loaders and their declarations (lapras.toml).

Each dataset lives in its own folder (``adult/``...). Loaders take an open psycopg connection
and load with ``COPY`` (never row by row). The folder path of a dataset is
``sql_fixtures.path(name)``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent


def path(name: str) -> Path:
    """The folder of a shipped dataset (for example ``path("adult") / "lapras.toml"``)."""
    return ROOT / name


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
