"""What the tool tests share: the running demo (``Demo``, made by the ``demo`` fixture of
``conftest.py``), the tolerances of noisy answers, and the SQLSTATE of a driver's exception."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

from .wiretap import WireTap

DATABASE, USER, PASSWORD = "lapras_demo", "analyst", "analyst"
ROOT = Path(__file__).resolve().parents[2]

# Tolerances: five standard errors of a fresh online answer in the demo's epoch. A count's
# standard error is ~26 for the first E fresh answers (E from the demo's log, about 35; the
# steady pacing, docs/privacy.md) and grows smoothly beyond them, to ~200 after some 130 of
# them; a sum of ages has sensitivity 90 (the largest age), so an average over n rows is off
# by about 90·σ/n.
COUNT_SIGMA = 200.0
AGE_SENSITIVITY = 90.0


def count_tolerance(sigmas: float = 5.0) -> float:
    return sigmas * COUNT_SIGMA


def avg_tolerance(exact: float, rows: float, sigmas: float = 5.0) -> float:
    """The tolerance of an AVG(age) near ``exact`` over ``rows`` rows: the noisy sum over the
    noisy count is off by about (90·σ + exact·σ) / rows."""
    return sigmas * COUNT_SIGMA * (AGE_SENSITIVITY + exact) / max(rows, 1.0)


def near_count(got: Any, exact: float, what: str = "") -> None:
    assert got is not None, f"{what}: no value"
    assert abs(float(got) - exact) <= count_tolerance(), (
        f"{what}: {got} is not near the exact {exact} (tolerance {count_tolerance():.0f})"
    )


def near_avg(got: Any, exact: float, rows: float, what: str = "") -> None:
    assert got is not None, f"{what}: no value"
    tol = avg_tolerance(exact, rows)
    assert abs(float(got) - exact) <= tol, (
        f"{what}: {got} is not near the exact {exact} (tolerance {tol:.2f})"
    )


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE a driver's exception carries (psycopg 3, psycopg2, ADBC, pyodbc), also
    when a library wrapped it (pandas, SQLAlchemy): the exception chain is searched."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        for attr in ("sqlstate", "pgcode"):
            value = getattr(e, attr, None)
            if isinstance(value, str) and len(value) == 5:
                return value
        args = getattr(e, "args", ())
        if args and isinstance(args[0], str) and re.fullmatch(r"[0-9A-Z]{5}", args[0]):
            return args[0]  # pyodbc: (sqlstate, message)
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]
    return None


class Mark(NamedTuple):
    """A point in the tap's record and in the demo's output."""

    sent: int
    log: int


@dataclass
class Demo:
    """A running ``lapras demo``, reached through the wire tap."""

    tap: WireTap
    proxy_port: int
    admin_dsn: str
    data_dir: Path
    output: list[str]
    host: str = "127.0.0.1"
    user: str = USER
    password: str = PASSWORD
    database: str = DATABASE
    _exact: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    @property
    def port(self) -> int:
        """The port tools connect to: the tap's, relaying to the proxy."""
        return self.tap.port

    @property
    def uri(self) -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def sqlalchemy_url(self, driver: str) -> str:
        return self.uri.replace("postgresql://", f"postgresql+{driver}://", 1)

    def exact(self, sql: str) -> list[tuple[Any, ...]]:
        """PostgreSQL's own answer, as the superuser of the backend (no proxy)."""
        if sql not in self._exact:
            with psycopg.connect(self.admin_dsn) as conn:
                self._exact[sql] = [tuple(r) for r in conn.execute(sql).fetchall()]
        return self._exact[sql]

    def exact_value(self, sql: str) -> Any:
        return self.exact(sql)[0][0]

    def mark(self) -> Mark:
        return Mark(self.tap.mark(), len(self.output))

    def sent(self, mark: Mark) -> list[str]:
        """The non-empty statements sent through the tap since ``mark``."""
        return [s for s in self.tap.since(mark.sent) if s.strip()]

    def explain(self, mark: Mark) -> str:
        """The SQL sent since ``mark`` (and what the proxy logged), for assertion messages."""
        text = "\nSQL sent by the tool:\n" + "\n".join(f"  > {s.strip()}" for s in self.sent(mark))
        log = self.output[mark.log :]
        return text + ("\nthe proxy logged:\n" + "".join(log[-40:]) if log else "")

    def sqlstate_of_statement(self, sql: str) -> str | None:
        """Send ``sql`` again, with psycopg, straight to the proxy: the SQLSTATE it fails with
        (for tools whose errors carry only a message)."""
        with psycopg.connect(self.uri, autocommit=True) as conn:
            try:
                if sql.lstrip().upper().startswith("COPY"):
                    with conn.cursor().copy(sql) as copy:
                        for _ in copy:
                            pass
                else:
                    conn.execute(sql)
            except psycopg.Error as exc:
                return exc.sqlstate
        return None


def run_script(args: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


CLIENTS = Path(__file__).resolve().parent / "clients"
