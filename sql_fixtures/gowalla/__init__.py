"""Gowalla check-ins of 1,000 users (see SOURCE.txt): DDL, a COPY loader, the declaration.

The rows are derived from ``checkins.txt.gz`` and ``poi_coos.txt.gz`` by :func:`rows` (pure
Python, also used by tests and benchmarks to compute exact answers without a database).
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
from pathlib import Path
from typing import Any

from sql_fixtures import copy_load

FOLDER = Path(__file__).parent
CHECKINS = FOLDER / "checkins.txt.gz"
PLACES = FOLDER / "poi_coos.txt.gz"
SCHEMA = FOLDER / "schema.sql"
DECLARATION = FOLDER / "lapras.toml"
ROWS = 157_251
TABLE = "public.checkins"
USERS = 1_000
COLUMNS = ("user_id", "poi_id", "lat", "lon", "checkin_date", "hour")

Row = tuple[int, int, float, float, dt.date, int]


def places() -> dict[int, tuple[float, float]]:
    """poi_id -> (latitude, longitude)."""
    out = {}
    with gzip.open(PLACES, "rt", encoding="utf-8") as f:
        for line in f:
            poi, lat, lon = line.split()
            out[int(poi)] = (float(lat), float(lon))
    return out


def rows() -> list[Row]:
    """The table's rows, in the order of the source file."""
    where = places()
    out: list[Row] = []
    with gzip.open(CHECKINS, "rt", encoding="utf-8") as f:
        for line in f:
            user, poi, when = line.split()
            t = dt.datetime.fromtimestamp(float(when), dt.UTC)
            lat, lon = where[int(poi)]
            out.append((int(user), int(poi), lat, lon, t.date(), t.hour))
    return out


def csv_text() -> str:
    """The rows as CSV for COPY (floats with every digit ``repr`` gives)."""
    buf = io.StringIO()
    for r in rows():
        buf.write(f"{r[0]},{r[1]},{r[2]!r},{r[3]!r},{r[4].isoformat()},{r[5]}\n")
    return buf.getvalue()


def load(conn: Any, *, table: str = TABLE) -> int:
    """Create the table (if missing) and load it with COPY when empty; return its row count.

    ``conn`` is a psycopg 3 connection of a role that may create the table. The load commits.
    """
    ddl = SCHEMA.read_text().replace(TABLE, table)
    return copy_load(conn, ddl=ddl, table=table, csv_text=csv_text())
