"""UCI Adult (CC BY 4.0; see SOURCE.txt): DDL, a COPY loader and the protected-table declaration."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from sql_fixtures import copy_load

FOLDER = Path(__file__).parent
DATA = FOLDER / "adult.data.gz"
SCHEMA = FOLDER / "schema.sql"
DECLARATION = FOLDER / "lapras.toml"
ROWS = 32_561
TABLE = "public.adult"


def csv_text() -> str:
    """adult.data as clean CSV: separators ', ' become ',', blank lines dropped."""
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        lines = [line.strip().replace(", ", ",") for line in f]
    return "\n".join(line for line in lines if line) + "\n"


def load(conn: Any, *, table: str = "public.adult") -> int:
    """Create the table (if missing) and load it with COPY when empty; return its row count.

    ``conn`` is a psycopg 3 connection of a role that may create the table. The load commits.
    """
    ddl = SCHEMA.read_text().replace("public.adult", table)
    return copy_load(conn, ddl=ddl, table=table, csv_text=csv_text())
