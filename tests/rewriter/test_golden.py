"""Golden cases (sql_fixtures/golden): expected classification, IR summary or SQLSTATE.

Accepted cases are also executed on PostgreSQL (the differential oracle): the exact answer as
the aggregator must equal ``postprocess(plan, W @ x)`` on the exact histogram (the marginal the
plan is over, of one pin of the table). ``view=`` names that marginal: the attributes the
statement uses, in the table's declaration order, e.g. ``view=(age, sex)`` or ``view=()``.
Passthrough cases are executed as the passthrough role and must succeed (the statistics
rewrites are valid SQL). Refused cases must never crash the rewriter.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from golden import Case, load_cases
from pins import exact_answer, pin_table

import rewriter
import sql_fixtures.gowalla as gowalla
from dp.pin import Pin
from rewriter.plan import KeyRef
from rewriter.reduce import marginal_name

ADULT = rewriter.load_schema(__file__.rsplit("/tests/", 1)[0] + "/sql_fixtures/adult/lapras.toml")
#: The check-ins as declared, but every row its own unit: the pin is then the table itself,
#: and PostgreSQL's exact answer is the rewriter's on the exact histogram.
CHECKINS = rewriter.parse_schema(
    re.sub(
        r"(?m)^(privacy_unit|\w*rows_per_unit\w*|lifetime_\w+) = .*$",
        "",
        gowalla.DECLARATION.read_text(),
    ),
    "gowalla-row-level.toml",
)
#: ... and declared by month, as it was before (refusals of expressions finer than a month).
CHECKINS_BY_MONTH = rewriter.parse_schema(
    re.sub(
        r'(?m)^unit = "day"$',
        'unit = "month"',
        re.sub(
            r"(?m)^(privacy_unit|\w*rows_per_unit\w*|lifetime_\w+) = .*$",
            "",
            gowalla.DECLARATION.read_text(),
        ),
    ),
    "gowalla-by-month.toml",
)
SCHEMAS = {"adult": ADULT, "checkins": CHECKINS, "checkins_by_month": CHECKINS_BY_MONTH}
CASES = load_cases()


def _kind(st: rewriter.Statement) -> str:
    if isinstance(st, rewriter.Composed):
        return "composed"
    if isinstance(st, rewriter.Refused):
        return f"sqlstate {st.error.sqlstate}"
    if isinstance(st, rewriter.Passthrough):
        return "passthrough-rewritten" if st.rewritten else "passthrough"
    if isinstance(st, rewriter.ZeroRowProbe):
        return "probe"
    return "dp"


def _cols(cols: tuple[rewriter.OutputColumn, ...]) -> str:
    return ",".join(f"{c.name}:{c.type_oid}" for c in cols)


def _fields(expect: str) -> dict[str, str]:
    """``key=value`` fields of an expectation; a value may be a parenthesised list with
    spaces (a marginal's name, ``view=(age, sex)``)."""
    return dict(re.findall(r"(\w+)=(\([^)]*\)|\S+)", expect))


def _plan(st: rewriter.DPStatement, case: Case) -> rewriter.Plan:
    if st.plan is not None:
        return st.plan
    assert case.params is not None, "a statement with parameters needs -- params:"
    return rewriter.bind(st, case.params)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_classification(case: Case) -> None:
    statements = rewriter.classify(case.sql, SCHEMAS[case.schema], time_zone=case.timezone)
    kinds = [_kind(s) for s in statements]
    words = case.expect.split()
    if words[0] == "composed" and len(words) > 1:
        assert kinds == ["composed"], statements
        st = statements[0]
        assert isinstance(st, rewriter.Composed)
        fields = _fields(case.expect)
        assert st.releases == int(fields["releases"])
        assert _cols(st.columns) == fields["columns"]
    elif words[0] in ("dp", "probe") and len(words) > 1:
        assert kinds == [words[0]], statements
        st = statements[0]
        fields = _fields(case.expect)
        if isinstance(st, rewriter.ZeroRowProbe):
            assert _cols(st.columns) == words[1]
        else:
            assert isinstance(st, rewriter.DPStatement)
            plan = _plan(st, case)
            assert plan.view == fields["view"]
            assert plan.view == marginal_name(plan.batch.domain.names)
            assert plan.batch.num_queries == int(fields["queries"])
            assert _cols(plan.columns) == fields["columns"]
            assert _cols(st.columns) == fields["columns"]
    else:
        assert ", ".join(kinds) == case.expect, statements
    for st in statements:
        if isinstance(st, rewriter.Refused):
            assert (
                isinstance(
                    st.error,
                    rewriter.RowAccessError
                    | rewriter.UnsupportedError
                    | rewriter.SqlSyntaxError
                    | rewriter.UndefinedColumnError
                    | rewriter.InvalidValueError,
                )
                or st.error.sqlstate != "XX000"
            )
            assert st.error.sqlstate != "XX000", st.error
            if case.message is not None:
                assert case.message in st.error.message, st.error.message
            if case.hint is not None:
                assert case.hint in (st.error.hint or ""), st.error.hint
        if isinstance(st, rewriter.DPStatement):
            _plan(st, case)  # binds


def _pg_sql(sql: str) -> str:
    return re.sub(r"\$(\d+)", "%s", sql)


@pytest.fixture(scope="module")
def pins(pg: Any) -> dict[str, Pin]:
    """One pin per declared table, read as needed."""
    return {}


def _pin(pins: dict[str, Pin], pg: Any, schema: str) -> Pin:
    if schema not in pins:
        [table] = SCHEMAS[schema].tables
        pins[schema] = pin_table(pg.aggregator_dsn, SCHEMAS[schema], table)
    return pins[schema]


@pytest.fixture(scope="module")
def adult_pin(pg: Any, pins: dict[str, Pin]) -> Pin:
    return _pin(pins, pg, "adult")


# one DP statement with its IR summary (multi-statement cases list kinds as "dp, passthrough",
# whose first word is then "dp,")
DP_CASES = [c for c in CASES if c.expect.split()[0] == "dp" and "view" in _fields(c.expect)]


def test_golden_marginal_names_parse() -> None:
    assert _fields("dp view=(age, sex) queries=2 columns=sex:25,count:20") == {
        "view": "(age, sex)",
        "queries": "2",
        "columns": "sex:25,count:20",
    }
    assert _fields("dp view=() queries=1 columns=count:20")["view"] == "()"
    assert len(DP_CASES) >= 80  # every accepted golden case is diffed against PostgreSQL


@pytest.mark.parametrize("case", DP_CASES, ids=[c.id for c in DP_CASES])
def test_accepted_cases_are_exact(case: Case, pg: Any, pins: dict[str, Pin]) -> None:
    [st] = rewriter.classify(case.sql, SCHEMAS[case.schema], time_zone=case.timezone)
    assert isinstance(st, rewriter.DPStatement)
    plan = _plan(st, case)
    ours = exact_answer(plan, _pin(pins, pg, case.schema))
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('TimeZone', %s, false)", [case.timezone])
        cur = (
            conn.execute(_pg_sql(case.sql), list(case.params))
            if case.params
            else conn.execute(case.sql)
        )
        theirs = cur.fetchall()
        assert cur.description is not None
        assert [(d.name, d.type_code) for d in cur.description] == [
            (c.name, c.type_oid) for c in plan.columns
        ]
    key_pos = [i for i, o in enumerate(plan.post.outputs) if isinstance(o, KeyRef)]
    if key_pos and len(theirs) != len(ours):
        # PostgreSQL drops empty groups; every public group is returned here
        present = {tuple(r[i] for i in key_pos) for r in theirs}
        ours = [r for r in ours if tuple(r[i] for i in key_pos) in present]
    assert len(ours) == len(theirs)
    if not plan.post.order_by:
        ours, theirs = sorted(ours, key=repr), sorted(theirs, key=repr)
    for a, b in zip(ours, theirs, strict=True):
        for x, y in zip(a, b, strict=True):
            if isinstance(y, Decimal) and x is not None:
                assert abs(float(x) - float(y)) <= 1e-9 * max(1.0, abs(float(y))), (a, b)
            elif isinstance(y, dt.datetime) and y.tzinfo is not None:
                # the same instant, shown with the same offset (the session's zone)
                assert isinstance(x, dt.datetime), (a, b)
                assert (x, x.utcoffset()) == (y, y.utcoffset()), (a, b)
            else:
                assert x == y, (a, b)


PASS_CASES = [c for c in CASES if c.file == "passthrough"]


@pytest.mark.parametrize("case", PASS_CASES, ids=[c.id for c in PASS_CASES])
def test_passthrough_cases_run_as_passthrough_role(case: Case, pg: Any) -> None:
    with psycopg.connect(pg.passthrough_dsn, autocommit=True) as conn:
        for st in rewriter.classify(case.sql, ADULT):
            assert isinstance(st, rewriter.Passthrough)
            if st.sql.lstrip().upper().startswith("COPY"):
                with conn.cursor().copy(st.sql.encode()) as copy:
                    for _ in copy:
                        pass
            else:
                conn.execute(st.sql.encode())


COMPOSED_CASES = [c for c in CASES if c.expect.split()[0] == "composed"]


def _exact(pin: Pin) -> Any:
    def answer(plan: rewriter.Plan) -> rewriter.Released:
        return rewriter.Released(answers=plan.batch.answer(pin.marginal(plan.batch.domain)))

    return answer


def test_composed_cases_are_many() -> None:
    assert len(COMPOSED_CASES) >= 30


@pytest.mark.parametrize("case", COMPOSED_CASES, ids=[c.id for c in COMPOSED_CASES])
def test_composed_cases_are_exact(case: Case, pg: Any, adult_pin: Pin) -> None:
    """A composed statement's releases answered exactly (noise off), combined by the
    rewriter's post-processing, equal PostgreSQL's answer: rows, values and result types.
    The cases are chosen so that every group they release holds rows (PostgreSQL omits empty
    groups; the proxy's groups are public)."""
    [st] = rewriter.classify(case.sql, ADULT)
    assert isinstance(st, rewriter.Composed)
    result = rewriter.run_composed(st, ADULT, _exact(adult_pin))
    assert len(result.plans) == st.releases
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        cur = conn.execute(case.sql)
        theirs = cur.fetchall()
        assert cur.description is not None
        assert [(d.name, d.type_code) for d in cur.description] == [
            (c.name, c.type_oid) for c in result.columns
        ]
    ours = list(result.rows)
    assert len(ours) == len(theirs), (ours, theirs)
    if not re.search(r"ORDER\s+BY[^()]*$", case.sql, re.I | re.S):
        ours, theirs = sorted(ours, key=repr), sorted(theirs, key=repr)
    for a, b in zip(ours, theirs, strict=True):
        for x, y in zip(a, b, strict=True):
            if isinstance(y, Decimal | float) and x is not None:
                assert abs(float(x) - float(y)) <= 1e-9 * max(1.0, abs(float(y))), (a, b)
                if isinstance(y, Decimal):
                    assert (
                        isinstance(x, Decimal) and x.as_tuple().exponent == y.as_tuple().exponent
                    ), (a, b)
            else:
                assert x == y, (a, b)
