"""US flights, Jan-Mar 2001 (vega-datasets; see SOURCE.txt): DDL, a COPY loader, the declaration.

The rows are derived from ``flights-20k.json.gz`` and ``airports.csv`` by :func:`rows` (pure
Python, also used by benchmarks to compute exact histograms without a database).
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import json
from pathlib import Path
from typing import Any

from sql_fixtures import copy_load

FOLDER = Path(__file__).parent
DATA = FOLDER / "flights-20k.json.gz"
AIRPORTS = FOLDER / "airports.csv"
SCHEMA = FOLDER / "schema.sql"
DECLARATION = FOLDER / "lapras.toml"
ROWS = 20_000
COLUMNS = (
    "date",
    "hour",
    "delay",
    "distance",
    "origin",
    "destination",
    "origin_state",
    "dest_state",
)

Row = tuple[dt.date, int, int, int, str, str, str | None, str | None]


def states() -> dict[str, str | None]:
    """IATA code -> USPS state code (None where the source says "NA")."""
    with AIRPORTS.open(encoding="utf-8") as f:
        return {r["iata"]: (None if r["state"] == "NA" else r["state"]) for r in csv.DictReader(f)}


def rows() -> list[Row]:
    """The table's rows, in the order of the source file."""
    st = states()
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    out: list[Row] = []
    for r in raw:
        when = dt.datetime.strptime(r["date"], "%Y/%m/%d %H:%M")
        out.append(
            (
                when.date(),
                when.hour,
                int(r["delay"]),
                int(r["distance"]),
                r["origin"],
                r["destination"],
                st.get(r["origin"]),
                st.get(r["destination"]),
            )
        )
    return out


def csv_text() -> str:
    """The rows as CSV for COPY (NULL = empty unquoted field)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows():
        w.writerow([r[0].isoformat(), *("" if v is None else v for v in r[1:])])
    return buf.getvalue()


def load(conn: Any, *, table: str = "public.flights") -> int:
    """Create the table (if missing) and load it with COPY when empty; return its row count.

    ``conn`` is a psycopg 3 connection of a role that may create the table. The load commits.
    """
    ddl = SCHEMA.read_text().replace("public.flights", table)
    return copy_load(conn, ddl=ddl, table=table, csv_text=csv_text())
