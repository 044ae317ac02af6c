"""A corpus of tool and analyst SQL over Adult and the Gowalla check-ins (issue 40).

Each ``*.sql`` file of this folder holds cases, one per ``-- id:`` header::

    -- id: time.superset.week          (unique; the file's theme is its first word)
    -- source: who writes this SQL, and how
    -- setup: SET TimeZone = 'Asia/Tokyo'       (optional; run first, on both sides)
    -- expect: refused 0A000 <why>               (optional; default: answered exactly)
    SELECT ...;

The corpus is run noise-off through the proxy and diffed against PostgreSQL by
``tests/test_corpus.py``; ``public.country_region`` (a public dimension table: :data:`REGIONS`)
is created by :func:`load_regions`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).parent
REGIONS_TABLE = "public.country_region"
#: Its declaration as a public table (rewriter.public_tables), for the corpus's lapras.toml.
REGIONS_DECLARATION = """
[public_tables.country_region]
columns = { country = "text", region = "text" }
"""

#: A public lookup: the region of each of Adult's countries (a fact about the world, not about
#: anyone in the table). Countries absent here have no region.
REGIONS: tuple[tuple[str, str], ...] = (
    ("United-States", "North America"),
    ("Canada", "North America"),
    ("Mexico", "Latin America"),
    ("Cuba", "Latin America"),
    ("Jamaica", "Latin America"),
    ("Puerto-Rico", "Latin America"),
    ("El-Salvador", "Latin America"),
    ("Guatemala", "Latin America"),
    ("Dominican-Republic", "Latin America"),
    ("Columbia", "Latin America"),
    ("Haiti", "Latin America"),
    ("Nicaragua", "Latin America"),
    ("Peru", "Latin America"),
    ("Ecuador", "Latin America"),
    ("Honduras", "Latin America"),
    ("Trinadad&Tobago", "Latin America"),
    ("Germany", "Europe"),
    ("England", "Europe"),
    ("Italy", "Europe"),
    ("Poland", "Europe"),
    ("Portugal", "Europe"),
    ("Greece", "Europe"),
    ("France", "Europe"),
    ("Ireland", "Europe"),
    ("Hungary", "Europe"),
    ("Scotland", "Europe"),
    ("Yugoslavia", "Europe"),
    ("Holand-Netherlands", "Europe"),
    ("Philippines", "Asia"),
    ("India", "Asia"),
    ("China", "Asia"),
    ("South", "Asia"),
    ("Japan", "Asia"),
    ("Vietnam", "Asia"),
    ("Taiwan", "Asia"),
    ("Iran", "Asia"),
    ("Thailand", "Asia"),
    ("Hong", "Asia"),
    ("Cambodia", "Asia"),
    ("Laos", "Asia"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    source: str
    sql: str
    setup: tuple[str, ...] = ()
    #: None: the answer must equal PostgreSQL's; else ``(sqlstate, why)`` of a listed refusal
    refused: tuple[str, str] | None = None

    @property
    def kind(self) -> str:
        return self.id.split(".", 1)[0]


def load_cases() -> list[Case]:
    """Every case of every file, in file and then text order."""
    cases: list[Case] = []
    for path in sorted(FOLDER.glob("*.sql")):
        for block in re.split(r"(?m)^(?=-- id:)", path.read_text())[1:]:
            headers = dict(re.findall(r"(?m)^-- (\w+): (.*)$", block))
            sql = "\n".join(
                line for line in block.splitlines() if not line.startswith("--")
            ).strip()
            refused = None
            if "expect" in headers:
                word, code, why = [*headers["expect"].split(None, 2), "", ""][:3]
                assert word == "refused", headers["expect"]
                refused = (code, why)
            cases.append(
                Case(
                    id=headers["id"].strip(),
                    source=headers.get("source", "").strip(),
                    sql=sql.rstrip(";").strip(),
                    setup=tuple(
                        s.strip() for s in headers.get("setup", "").split(";") if s.strip()
                    ),
                    refused=refused,
                )
            )
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate corpus ids"
    return cases


def load_regions(conn: Any) -> None:
    """Create and fill ``public.country_region`` (idempotent); ``conn`` may create tables."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {REGIONS_TABLE} (country text PRIMARY KEY, region text NOT NULL)"
    )
    conn.execute(f"DELETE FROM {REGIONS_TABLE}")
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {REGIONS_TABLE} VALUES (%s, %s)", REGIONS)
