"""Apache Superset, for real, in its own virtual environment (Superset needs SQLAlchemy 1.4;
``.ci/run`` makes ``.ci/superset-venv``). ``superset_probe.py`` runs there: ``superset db
upgrade`` / ``fab create-admin`` / ``init`` on a SQLite metadata database, then the REST API:
a database connected to the proxy, the dataset ``adult``, saved charts and their data, a
native filter's value list, the explore view's column values, SQL Lab, and the samples pane.

Skipped when the virtual environment does not exist (set ``LAPRAS_SUPERSET_VENV`` to use
another one). Takes about 30 s.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from .toolkit import ROOT, Demo, near_avg, near_count, run_script

VENV = Path(os.environ.get("LAPRAS_SUPERSET_VENV") or ROOT / ".ci" / "superset-venv")
PROBE = Path(__file__).resolve().parent / "superset_probe.py"
MARKER = re.compile(r"^SELECT 'lapras-step (.*)'$")

pytestmark = pytest.mark.skipif(
    not (VENV / "bin" / "superset").exists(),
    reason=f"no Superset virtual environment at {VENV} (.ci/run makes it)",
)


class Run:
    """The probe's results, and the SQL Superset sent in each step (split by its markers)."""

    def __init__(self, out: dict[str, Any], sent: list[str]) -> None:
        self.out = out
        self.by_step: dict[str, list[str]] = {}
        current = "setup"
        for s in sent:
            m = MARKER.match(s.strip())
            if m:
                current = m.group(1).removeprefix("after ")
                continue
            self.by_step.setdefault(self.next_step(current), []).append(s)

    def next_step(self, previous: str) -> str:
        """Statements after the marker 'after X' belong to the step that follows X."""
        steps = list(self.out)
        if previous == "start":
            return steps[0] if steps else "setup"
        if previous in steps and steps.index(previous) + 1 < len(steps):
            return steps[steps.index(previous) + 1]
        return previous

    def step(self, name: str) -> dict[str, Any]:
        assert name in self.out, f"the probe did not reach {name}: {self.out}"
        return dict(self.out[name])

    def explain(self, name: str) -> str:
        sent = [s for s in self.by_step.get(name, []) if s.strip()]
        return f"\nSuperset's answer: {self.out.get(name)}\nSQL sent by Superset:\n" + "\n".join(
            f"  > {s.strip()}" for s in sent
        )

    def data(self, name: str) -> Any:
        step = self.step(name)
        assert step["status"] in (200, 201) and step["data"] is not None, self.explain(name)
        return step["data"]


@pytest.fixture(scope="module")
def superset(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Run:
    python = VENV / "bin" / "python"
    workdir = tmp_path_factory.mktemp("superset")
    mark = demo.mark()
    r = run_script([str(python), str(PROBE), str(workdir), demo.sqlalchemy_url("psycopg2")], 420)
    lines = [line for line in r.stdout.splitlines() if line.startswith("LAPRAS-PROBE ")]
    assert r.returncode == 0 and lines, f"the probe failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return Run(json.loads(lines[-1].removeprefix("LAPRAS-PROBE ")), demo.sent(mark))


def test_database_and_dataset(superset: Run) -> None:
    assert superset.data("test_connection") == "OK", superset.explain("test_connection")
    superset.data("database")
    assert "adult" in superset.data("tables"), superset.explain("tables")
    superset.data("dataset")
    columns = superset.data("dataset_columns")
    assert {"age", "sex", "race", "income"} <= set(columns), superset.explain("dataset_columns")


def test_bar_chart_count_by_sex(demo: Demo, superset: Run) -> None:
    rows = superset.data("bar_count_by_sex")
    exact = dict(demo.exact("SELECT sex, count(*) FROM adult GROUP BY sex"))
    got = {r["sex"]: r["count"] for r in rows}
    assert set(got) == set(exact), superset.explain("bar_count_by_sex")
    for sex, n in exact.items():
        near_count(got[sex], n, f"count of {sex}" + superset.explain("bar_count_by_sex"))
    assert [r["sex"] for r in rows] == ["Male", "Female"]  # ORDER BY count DESC


def test_avg_age_chart(demo: Demo, superset: Run) -> None:
    (row,) = superset.data("avg_age")
    exact = float(demo.exact_value("SELECT avg(age) FROM adult"))
    near_avg(row["AVG(age)"], exact, 32561, superset.explain("avg_age"))


def test_filtered_chart(demo: Demo, superset: Run) -> None:
    (row,) = superset.data("filtered_count")
    exact = demo.exact_value(
        "SELECT count(*) FROM adult WHERE sex = 'Female' AND age >= 30 AND age < 40"
    )
    near_count(row["count"], exact, superset.explain("filtered_count"))


def test_native_filter_values(superset: Run) -> None:
    rows = superset.data("native_filter_values")
    assert [r["sex"] for r in rows] == ["Female", "Male"], superset.explain("native_filter_values")


def test_explore_column_values(superset: Run) -> None:
    values = superset.data("column_values")
    assert sorted(values) == ["Female", "Male"], superset.explain("column_values")


def test_sql_lab_aggregate(demo: Demo, superset: Run) -> None:
    rows = superset.data("sqllab_aggregate")
    exact = {
        s: (n, a)
        for s, n, a in demo.exact("SELECT sex, count(*), avg(age) FROM adult GROUP BY sex")
    }
    got = {r["sex"]: (r["n"], r["mean_age"]) for r in rows}
    assert set(got) == set(exact), superset.explain("sqllab_aggregate")
    for sex, (n, mean_age) in exact.items():
        near_count(got[sex][0], n, f"count of {sex}" + superset.explain("sqllab_aggregate"))
        near_avg(
            got[sex][1],
            float(mean_age),
            n,
            f"mean age of {sex}" + superset.explain("sqllab_aggregate"),
        )


@pytest.mark.parametrize("step", ["sqllab_rows", "samples"])
def test_rows_refused(demo: Demo, superset: Run, step: str) -> None:
    result = superset.step(step)
    assert result["data"] is None and result["status"] >= 400, superset.explain(step)
    assert "refused" in (result["error"] or ""), superset.explain(step)
    # Superset shows the message, not the SQLSTATE: send its statement again, with psycopg
    reads = [
        s for s in superset.by_step.get(step, []) if re.search(r"\bFROM\s+(public\.)?adult\b", s)
    ]
    assert reads, superset.explain(step)
    assert demo.sqlstate_of_statement(reads[-1]) == "42501", superset.explain(step)
