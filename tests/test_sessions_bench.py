"""The parts of the session benchmark (bench/accuracy/sessions.py, issue 39): its sessions, the
tolerance rule and the domain check, the Tumult translation, the peers' accounting, and the
offline Matrix Mechanism's answers. Correctness only: no accuracy figure is asserted."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

import rewriter
from bench.accuracy import judge, tumult_sql
from bench.accuracy.sessions import (
    cks_delta,
    composed_epsilon,
    declaration,
    offline_mm,
    smartnoise_epsilon,
    zcdp_rho,
)
from dp.domain import Domain, QueryBatch
from dp.noise import SeededSampler
from dp.pin import Pin
from dp.units import Contribution
from sql_fixtures.sessions import KINDS, sessions

SCHEMA = rewriter.parse_schema(declaration(), "sessions.toml")


def test_sessions_are_deterministic_and_realistic() -> None:
    a, b, other = sessions(11), sessions(11), sessions(12)
    assert a == b
    assert [s.steps for s in a] != [s.steps for s in other]
    steps = [st for s in a for st in s.steps]
    assert len(steps) >= 400
    assert {st.table for st in steps} == {"adult", "checkins"}
    assert {st.kind for st in steps} <= set(KINDS)
    for kind in ("overview", "drill", "filter", "dashboard", "repeat", "near-repeat", "tool"):
        assert any(st.kind == kind for st in steps), kind
    for s in a:  # a repeat re-asks an earlier statement of its own session, verbatim
        for i, st in enumerate(s.steps):
            if st.kind == "repeat":
                assert st.sql in {x.sql for x in s.steps[:i]}
    # every statement is one the product's rewriter parses (answered or refused, never a crash)
    for st in steps[:60]:
        [c] = rewriter.classify(st.sql, SCHEMA)
        assert not (isinstance(c, rewriter.Refused) and c.error.sqlstate == "XX000"), st.sql


def test_shorter_sessions_keep_their_beginning() -> None:
    full, short = sessions(3), sessions(3, scale=0.25)
    for f, s in zip(full, short, strict=True):
        assert len(s.steps) < len(f.steps)
        assert f.steps[:5] == s.steps[:5]


@pytest.mark.parametrize(
    ("role", "answer", "exact", "ok"),
    [
        ("count", 1150, 1000, True),  # 150 (more than 10%)
        ("count", 1151, 1000, False),
        ("count", 150, 0, True),  # or 150
        ("count", 2200, 2000, True),  # 10% (more than 150)
        ("count", 2201, 2000, False),
        ("count", -150, 0, True),
        ("count", 19800, 18000, True),
        ("count", 19801, 18000, False),
        ("statistic", 10.9, 10, True),  # 10% only, however small
        ("statistic", 11.1, 10, False),
        ("statistic", 0.1, 0, False),
        ("statistic", Decimal("38.5"), Decimal("38.58"), True),
        ("statistic", None, None, True),  # NULL where PostgreSQL has NULL
        ("statistic", None, 3.0, False),
        ("count", 0, None, False),
        ("statistic", True, True, True),  # not a number: equal
        ("statistic", False, True, False),
    ],
)
def test_tolerance_rule(role: str, answer: Any, exact: Any, ok: bool) -> None:
    assert judge.within(role, answer, exact) is ok


def _roles(sql: str) -> list[tuple[str, str, str]]:
    return [(o.role, o.agg, o.column) for o in judge.outputs(sql)]


def test_output_roles() -> None:
    assert _roles(
        "SELECT sex, count(*), avg(age), sum(hours_per_week) FROM adult GROUP BY sex"
    ) == [
        ("key", "", ""),
        ("count", "count", ""),
        ("statistic", "avg", "age"),
        ("count", "sum", "hours_per_week"),
    ]
    # Tableau's number of records, a rounded average, a ratio, a percentile, COUNT(DISTINCT)
    assert [r[0] for r in _roles('SELECT "a"."race", SUM(1) FROM adult "a" GROUP BY 1')] == [
        "key",
        "count",
    ]
    assert _roles("SELECT round(avg(age), 1) FROM adult") == [("statistic", "avg", "age")]
    assert _roles("SELECT count(*) FILTER (WHERE age > 50) * 1.0 / count(*) FROM adult") == [
        ("statistic", "", "")
    ]
    assert _roles(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY age), count(DISTINCT race) FROM adult"
    ) == [("statistic", "percentile", "age"), ("statistic", "count_distinct", "race")]
    # through a derived table: its aggregate is a measure, its key a key
    assert _roles(
        'select "_"."race", "_"."a0" from (select race, count(1) as a0 from adult group by race) "_"'
    ) == [("key", "", ""), ("count", "count", "")]
    # a bucket of per-user counts that the outer query groups by is a key
    assert [r[0] for r in _roles(
        "SELECT width_bucket(n, 0, 2000, 20) AS b, count(*) FROM "
        "(SELECT user_id, count(*) AS n FROM checkins GROUP BY user_id) t GROUP BY 1"
    )] == ["key", "count"]  # fmt: skip
    # a running total of counts follows the count rule, a lag difference the statistic rule
    assert [r[0] for r in _roles(
        "SELECT age, sum(count(*)) OVER (ORDER BY age), count(*) - lag(count(*)) OVER "
        "(ORDER BY age) FROM adult GROUP BY age"
    )] == ["key", "count", "statistic"]  # fmt: skip


def test_a_grouped_statement_is_within_tolerance_when_all_its_cells_are() -> None:
    outs = judge.outputs("SELECT sex, count(*), avg(age) FROM adult GROUP BY sex")
    exact = [("Female", 10771, Decimal("36.86")), ("Male", 21790, Decimal("39.43"))]
    good = [("Male", 21700, 39.0), ("Female", 10800, 37.5)]  # matched by key, not position
    assert judge.judge(outs, exact, good).within
    one_bad = [("Male", 21700, 45.0), ("Female", 10800, 37.5)]
    j = judge.judge(outs, exact, one_bad)
    assert not j.within and sum(not c.ok for c in j.cells) == 1
    missing = [("Male", 21700, 39.0)]
    j = judge.judge(outs, exact, missing)
    assert not j.within and any(c.missing for c in j.cells)
    # a group PostgreSQL omits (no row) is judged on its counts only: near 0 passes
    extra = [*good, ("Other", 12, None)]
    assert judge.judge(outs, exact, extra).within
    assert not judge.judge(outs, exact, [*good, ("Other", 400, 30.0)]).within
    # keys spelled differently by a client library (a float key, a date as text) still match
    outs2 = judge.outputs("SELECT hour, checkin_date, count(*) FROM checkins GROUP BY 1, 2")
    assert judge.judge(outs2, [(3, dt.date(2010, 1, 1), 500)], [(3.0, "2010-01-01", 520)]).within


def test_domain_check() -> None:
    attrs = judge.attributes(SCHEMA, "adult")
    outs = judge.outputs(
        "SELECT count(*), avg(age), sum(hours_per_week), stddev(age), count(DISTINCT sex) FROM adult"
    )
    exact = [(100, 40.0, 4000, 12.0, 2)]
    fine = judge.judge(outs, exact, [(0, 17.0, 0, 0.0, 2)])
    assert judge.domain_violations(fine, attrs) == 0
    bad = judge.judge(outs, exact, [(-3, 95.0, -10, -1.0, 3)])
    assert judge.domain_violations(bad, attrs) == 5
    checkins = judge.attributes(SCHEMA, "checkins")
    outs = judge.outputs("SELECT avg(hour), max(lat) FROM checkins")
    assert judge.domain_violations(judge.judge(outs, [(12.0, 60.0)], [(24.5, 95.0)]), checkins) == 2


def test_tumult_translation() -> None:
    spec = tumult_sql.translate(
        'SELECT "public"."adult"."sex" AS "sex", AVG("public"."adult"."age") AS "avg", '
        "round(avg(hours_per_week), 1), count(*) FILTER (WHERE income = '>50K') "
        'FROM "public"."adult" WHERE "public"."adult"."age" >= 30 GROUP BY "public"."adult"."sex" '
        "ORDER BY 2 DESC LIMIT 1",
        SCHEMA,
    )
    assert spec["table"] == "adult" and spec["group_by"] == ["sex"]
    assert spec["where"] == "(age >= 30)"
    assert [(a["func"], a["column"]) for a in spec["aggs"]] == [
        ("avg", "age"),
        ("avg", "hours_per_week"),
        ("count", None),
    ]
    assert spec["aggs"][0]["bounds"] == [17.0, 90.0] and spec["aggs"][1]["round"] == 1
    assert spec["aggs"][2]["where"] == "income = '>50K'"
    # the worker's rows (keys, then aggregates) back in the statement's shape and order
    got = tumult_sql.rows(spec, [["Female", 36.9, 38.42, 1100.0], ["Male", 39.4, 42.47, 6500.0]])
    assert got == [("Male", 39.4, 42.5, 6500.0)]
    # a filter-only derived table is merged; a CTE too
    spec = tumult_sql.translate(
        "WITH w AS (SELECT * FROM adult WHERE hours_per_week >= 40) "
        "SELECT count(*) FROM (SELECT * FROM w WHERE sex = 'Female') t",
        SCHEMA,
    )
    assert spec["where"] == "(sex = 'Female') AND (hours_per_week >= 40)"
    spec = tumult_sql.translate("SELECT count(DISTINCT user_id) FROM checkins", SCHEMA)
    assert spec["table"] == "checkins" and spec["aggs"][0]["func"] == "count_distinct"
    for sql in (
        "SELECT a.sex, count(*) FROM adult a JOIN adult b USING (age) GROUP BY 1",
        "SELECT floor(age / 10), count(*) FROM adult GROUP BY 1",
        "SELECT sex, count(*) FROM adult GROUP BY sex HAVING count(*) > 10",
        "SELECT lat, count(*) FROM checkins GROUP BY lat",
        "SELECT count(*) * 2 FROM adult",
        "SELECT avg(n) FROM (SELECT sex, count(*) AS n FROM adult GROUP BY sex) t",
    ):
        with pytest.raises(tumult_sql.NotExpressible):
            tumult_sql.translate(sql, SCHEMA)


def test_peers_accounting() -> None:
    # CKS: sigma 29.02 per query for 100 unit-sensitivity Gaussian queries at (1, 1e-3)
    # (PRIVACY-NOTES §6): rho = 100 / (2 * 29.02^2)
    assert zcdp_rho(1.0, 1e-3) == pytest.approx(100 / (2 * 29.02**2), rel=2e-3)
    rho = zcdp_rho(1.0, 1e-6)
    assert cks_delta(rho, 1.0) <= 1e-6 < cks_delta(rho * 1.01, 1.0)
    # and it is never worse than the standard conversion
    big_l = math.log(1e6)
    assert rho >= (math.sqrt(1 + big_l) - math.sqrt(big_l)) ** 2
    for k in (1, 10, 200, 2000):
        eps0, delta0, how = smartnoise_epsilon(k, 1.0, 1e-6)
        assert eps0 >= 1.0 / k * (1 - 1e-9)  # never below basic composition
        assert composed_epsilon(eps0, k, 5e-7) <= 1.0 + 1e-9
        assert delta0 * k + 5e-7 <= 1e-6 * (1 + 1e-9)
        assert (how == "optimal") == (eps0 > 1.0 / k * (1 + 1e-9))
    assert smartnoise_epsilon(500, 1.0, 1e-6)[2] == "optimal"


class Recorder:
    """A seeded sampler that keeps what it drew."""

    def __init__(self, seed: int) -> None:
        self.inner = SeededSampler(seed)
        self.draws: list[np.ndarray] = []

    def gaussian(self, scale: float, size: int) -> np.ndarray:
        d = np.asarray(self.inner.gaussian(scale, size))
        self.draws.append(d)
        return d


def test_offline_mm_answers_by_least_squares() -> None:
    from dp.marginals import plan_release

    dom = Domain.of(("a", 4))
    x = np.array([30.0, 5.0, 12.0, 40.0])
    pin = Pin.from_dense(dom, x)
    counts = QueryBatch.from_dense(dom, np.eye(4))
    ranges = QueryBatch.from_dense(dom, [[1, 1, 0, 0], [0, 1, 1, 1]])
    rec = Recorder(5)
    got = offline_mm([counts, ranges, counts], pin, Contribution(), rec, epsilon=1.0, delta=1e-6)
    [plan] = plan_release([counts, ranges], laplace=False)  # the same plan: it is deterministic
    a = plan.reduction.expand(plan.strategy)
    [noise] = rec.draws
    y = a @ x + noise
    x_hat = np.linalg.lstsq(a, y, rcond=None)[0]
    for batch, answer in zip([counts, ranges, counts], got, strict=True):
        assert answer is not None
        w = batch.matrix.toarray()
        np.testing.assert_allclose(answer[0], w @ x_hat, rtol=1e-8, atol=1e-8)
    # a repeat of a batch is the same answer (one release, answered twice)
    assert got[0] is not None and got[2] is not None
    np.testing.assert_array_equal(got[0][0], got[2][0])
