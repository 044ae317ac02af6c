"""Reading golden cases: ``sql_fixtures/golden/*.sql``, one case per ``-- title:`` header."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[2] / "sql_fixtures" / "golden"


@dataclass(frozen=True)
class Case:
    file: str
    title: str
    expect: str
    params: tuple[object, ...] | None
    sql: str
    message: str | None = None  # a refusal's message contains this text
    hint: str | None = None  # and its hint this text
    schema: str = "adult"  # the declaration: adult, or checkins (the Gowalla table, row level)
    timezone: str = "UTC"  # the session's TimeZone (set on the backend's session too)

    @property
    def id(self) -> str:
        return f"{self.file}:{self.title}"


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(GOLDEN.glob("*.sql")):
        chunks = re.split(r"\n(?=-- title:)", path.read_text(encoding="utf-8"))
        for chunk in chunks:
            if not chunk.startswith("-- title:"):
                continue
            headers: dict[str, str] = {}
            body: list[str] = []
            for line in chunk.split("\n"):
                m = re.match(r"^-- (title|expect|params|message|hint|schema|timezone): (.*)$", line)
                if m and not body:
                    headers[m.group(1)] = m.group(2).strip()
                else:
                    body.append(line)
            params = tuple(ast.literal_eval(headers["params"])) if "params" in headers else None
            cases.append(
                Case(
                    file=path.stem,
                    title=headers["title"],
                    expect=headers["expect"],
                    params=params,
                    sql="\n".join(body).strip(),
                    message=headers.get("message"),
                    hint=headers.get("hint"),
                    schema=headers.get("schema", "adult"),
                    timezone=headers.get("timezone", "UTC"),
                )
            )
    return cases
