"""Ruby pg (Debian's ruby-pg, on libpq): simple queries, exec_params, a named prepared
statement freed with SQL DEALLOCATE, typed results, and a row read refused with 42501. The
script is ``clients/ruby_pg.rb``."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from .toolkit import CLIENTS, Demo, near_avg, near_count, run_script

Result = tuple[dict[str, Any], str]
RUBY = shutil.which("ruby")

pytestmark = pytest.mark.skipif(
    RUBY is None
    or subprocess.run([RUBY, "-rpg", "-rjson", "-e1"], capture_output=True).returncode != 0,
    reason="ruby with the pg gem is not installed (apt-get install ruby-pg)",
)


@pytest.fixture(scope="module")
def result(demo: Demo) -> Result:
    mark = demo.mark()
    r = run_script(
        [str(RUBY), str(CLIENTS / "ruby_pg.rb"), demo.host, str(demo.port), demo.database, demo.user,
         demo.password]
    )  # fmt: skip
    explain = demo.explain(mark)
    assert r.returncode == 0, r.stderr + explain
    return json.loads(r.stdout.splitlines()[-1]), explain


def step(result: Result, name: str) -> Any:
    out, explain = result
    assert f"{name}_error" not in out, out[f"{name}_error"] + explain
    return out[name]


def test_grouped(demo: Demo, result: Result) -> None:
    exact = dict(demo.exact("SELECT sex, count(*) FROM adult GROUP BY sex"))
    got = {sex: int(n) for sex, n in step(result, "grouped")}  # text results: strings
    assert set(got) == set(exact), result[1]
    for sex, n in exact.items():
        near_count(got[sex], n, f"count of {sex}" + result[1])
    notices = result[0]["notices"]
    assert notices and all("LAPRAS" in (n or "") for n in notices), notices


def test_exec_params(demo: Demo, result: Result) -> None:
    exact = demo.exact_value("SELECT count(*) FROM adult WHERE age > 40 AND sex = 'Male'")
    near_count(int(step(result, "params")[0][0]), exact, "exec_params" + result[1])


def test_prepared(demo: Demo, result: Result) -> None:
    exact = {
        income: (n, a)
        for income, n, a in demo.exact(
            "SELECT income, count(*), avg(age) FROM adult GROUP BY income"
        )
    }
    prepared = step(result, "prepared")
    assert [row[0] for row in prepared] == ["<=50K", ">50K"], result[1]
    for income, n, mean_age in prepared:
        near_count(int(n), exact[income][0], f"count of {income}" + result[1])
        near_avg(
            float(mean_age),
            float(exact[income][1]),
            exact[income][0],
            f"mean age of {income}" + result[1],
        )


def test_sql_deallocate_of_a_protocol_statement(result: Result) -> None:
    assert step(result, "deallocate") == "DEALLOCATE"


def test_typed_results(demo: Demo, result: Result) -> None:
    value, cls = step(result, "typed")
    assert cls == "Integer"  # int8, decoded by the basic type map
    near_count(value, demo.exact_value("SELECT count(*) FROM adult WHERE sex = 'Female'"))


def test_rows_refused(result: Result) -> None:
    assert step(result, "rows") == ["PG::InsufficientPrivilege", "42501"], result[1]
    assert step(result, "after") == [["1"]]
