"""Template prediction (rewriter.predict): recurring queries, expansion, cap, backtest, parsers."""

from __future__ import annotations

import datetime as dt

import pytest

from rewriter import parse_schema
from rewriter.predict import (
    DAY,
    LogRecord,
    PredictConfig,
    backtest,
    parametrise,
    parse_csvlog,
    parse_pg_stat_statements,
    parse_sql_file,
    predict,
    render,
    resolve,
    round_binding,
    template_values,
)

SCHEMA = parse_schema(
    """
[tables.flights]
schema = "public"
[tables.flights.columns]
day = "date"
hour = "integer"
delay = "integer"
distance = "double precision"
origin = "text"
[tables.flights.attributes.day]
kind = "date"
min = "2001-01-01"
max = "2001-03-31"
[tables.flights.attributes.hour]
kind = "integer"
min = 0
max = 23
[tables.flights.attributes.delay]
kind = "integer"
edges = [-60, -20, 0, 20, 60, 600]
[tables.flights.attributes.distance]
kind = "numeric"
edges = [0, 200, 400, 600, 800, 1000]
[tables.flights.attributes.origin]
kind = "categorical"
values = ["SFO", "LAX", "JFK"]
[tables.flights.views]
times = ["day", "hour", "origin"]
delays = ["delay", "distance", "origin"]
""",
    "test.toml",
)

T0 = dt.datetime(2001, 1, 1, 9, 0, tzinfo=dt.UTC).timestamp()


def rec(day: float, sql: str, who: str = "ana") -> LogRecord:
    return LogRecord(time=T0 + day * DAY, analyst=who, sql=sql)


DASH = "SELECT origin, count(*) FROM flights WHERE hour >= 6 AND hour < 12 GROUP BY origin"
ONEOFF = "SELECT count(*) FROM flights WHERE origin = 'JFK' AND hour = 3"


def test_recurrence_is_learned_from_the_log() -> None:
    """A daily dashboard and a one-off question: the rolling-origin backtest of the log
    itself says the dashboard comes back and the one-off does not (it was asked once and not
    again in the two windows after it)."""
    log = [rec(d, DASH) for d in range(5)] + [rec(2.5, ONEOFF)]
    p = predict(log, SCHEMA, now=T0 + 5 * DAY)
    by = {q.sql: q for q in p.queries}
    assert [q.sql for q in p.queries] == [DASH, ONEOFF]  # every earlier statement is a candidate
    dash, one = by[DASH], by[ONEOFF]
    assert dash.view == "(hour, origin)" and dash.occurrences == 5 and dash.reason == "exact"
    assert (dash.windows, dash.analysts, one.windows) == (5, 1, 1)
    assert p.recurrence is not None and p.recurrence.origins == 4
    # classes: the dashboard was asked again at 4 of 4 origins, the one-off at 0 of 2
    assert p.recurrence.rate == pytest.approx(4 / 6)
    # each class's rate, shrunk to the log's, times o / (o + 1) for the o = 4 origins
    assert dash.probability == pytest.approx((1 + 2 * 4 / 6) / 3 * 4 / 5)
    assert one.probability == pytest.approx((0 + 2 * 4 / 6) / 3 * 4 / 5)
    assert [q.sql for q in predict(log, SCHEMA, now=T0 + 5 * DAY, config=PredictConfig(
        min_probability=0.5)).queries] == [DASH]  # fmt: skip
    # spacing/case variants are the same query (same rows)
    log2 = [rec(0, DASH), rec(1, DASH.lower().replace("  ", " ") + " ")]
    assert len(predict(log2, SCHEMA, now=T0 + 2 * DAY).queries) == 1
    # the stacked batch for the engine is over the marginal of the columns used (both use
    # hour and origin: 3 groups and 1 count)
    (v,) = p.views
    assert v.batch.num_queries == 4 and v.batch.domain == dash.batch.domain
    assert v.batch.domain.names == ("hour", "origin")
    assert p.batch("flights", "(hour, origin)") is v.batch
    assert "GROUP BY origin;" in p.sql_script()


def test_permuted_groups_and_equivalent_conditions_are_one_statement() -> None:
    a = "SELECT origin, hour, count(*) FROM flights GROUP BY origin, hour"
    b = "SELECT hour, origin, count(*) FROM flights GROUP BY hour, origin"
    c = "SELECT count(*) FROM flights WHERE hour > 5 AND hour < 12"
    d = "SELECT count(*) FROM flights WHERE hour >= 6 AND hour <= 11"
    res, bad = resolve([rec(0, a), rec(1, b), rec(2, c), rec(3, d)], SCHEMA)
    assert bad == 0
    assert res[0].ident == res[1].ident and res[2].ident == res[3].ident
    assert res[0].plan is not None and res[1].plan is not None
    assert res[0].plan.batch.key != res[1].plan.batch.key  # the rows come in another order
    assert len(predict([rec(0, a), rec(1, b)], SCHEMA, now=T0 + 2 * DAY).queries) == 1


def test_recurrence_across_analysts() -> None:
    """Questions that other analysts asked before recur with the rate such questions had:
    here every statement asked by two analysts came back, statements of one did not."""
    shared = [f"SELECT count(*) FROM flights WHERE hour = {h}" for h in range(4)]
    own = [f"SELECT count(*) FROM flights WHERE hour = {h}" for h in range(10, 16)]
    log = []
    for d in range(6):
        for i, q in enumerate(shared):
            log.append(rec(d, q, who=f"user{(d + i) % 3}"))
        log.append(rec(d + 0.5, own[d], who="solo"))
    p = predict(log, SCHEMA, now=T0 + 6 * DAY)
    by = {q.sql: q for q in p.queries}
    assert all(by[q].analysts >= 2 for q in shared)
    assert min(by[q].probability for q in shared) > max(by[q].probability for q in own)


def test_a_log_of_one_window_knows_nothing_of_recurrence() -> None:
    log = [rec(0.1, DASH), rec(0.2, ONEOFF), rec(0.3, DASH), rec(0.4, DASH)]
    p = predict(log, SCHEMA, now=T0 + 1 * DAY)
    assert p.recurrence is not None and p.recurrence.origins == 0
    # Laplace's rule with a sceptical prior on the calls, c / (c + 3): 3 / 6 and 1 / 4
    assert [(q.sql, q.probability) for q in p.queries] == [(DASH, 0.5), (ONEOFF, 0.25)]


def test_sliding_date_window_shifted_to_next_day() -> None:
    def q(d: int) -> str:
        a = (dt.date(2001, 1, 1) + dt.timedelta(days=d - 7)).isoformat()
        b = (dt.date(2001, 1, 1) + dt.timedelta(days=d)).isoformat()
        return f"SELECT hour, count(*) FROM flights WHERE day >= '{a}' AND day < '{b}' GROUP BY 1"

    log = [rec(d, q(d)) for d in range(10, 14)]
    p = predict(log, SCHEMA, now=T0 + 14 * DAY - 9 * 3600)  # midnight of day 14
    sliding = [x for x in p.queries if x.reason == "sliding"]
    assert len(sliding) == 1
    assert sliding[0].bindings == ("2001-01-08", "2001-01-15")
    assert sliding[0].probability == 1.0
    # none of the old windows recurs exactly, so they are not predicted; new pairs of the
    # dates seen are (the template recurs daily), unlikely: the backtest saw none asked
    assert {x.reason for x in p.queries} == {"sliding", "instance"}
    assert p.recurrence is not None and p.recurrence.instance_hits == 0
    assert max(x.probability for x in p.queries if x.reason == "instance") < 0.1
    unslid = predict(log, SCHEMA, now=T0 + 14 * DAY, config=PredictConfig(slide_dates=False))
    assert {x.reason for x in unslid.queries} == {"instance"}


def test_round_binding_to_bins() -> None:
    t = SCHEMA.tables["flights"].attributes
    assert round_binding(t["delay"], ">=", -15) == -20
    assert round_binding(t["delay"], "<", 7) == 20
    assert round_binding(t["delay"], "<=", 7) == 19  # closed integer bins [0, 19]
    assert round_binding(t["delay"], ">", 7) == -1  # > -1 is >= 0
    assert round_binding(t["delay"], ">=", 0) == 0
    assert round_binding(t["delay"], ">=", -999) == -60  # clamped to the domain
    assert round_binding(t["distance"], ">=", 1014.28) == 1000
    assert round_binding(t["distance"], "<", 250.5) == 400
    assert round_binding(t["delay"], "=", 5) is None
    assert round_binding(t["origin"], "=", "SFO") is None


def test_cut_bins_are_rounded_and_grouped() -> None:
    # brushing jitter: ranges that cut bins, all inside [200, 600)
    qs = [
        "SELECT count(*) FROM flights WHERE distance >= 214.3 AND distance < 590",
        "SELECT count(*) FROM flights WHERE distance >= 250 AND distance < 571.4",
        "SELECT count(*) FROM flights WHERE distance >= 200 AND distance < 600",
    ]
    log = [rec(i, s) for i, s in enumerate(qs)]
    res, bad = resolve(log, SCHEMA)
    assert bad == 0 and len({r.ident for r in res}) == 1
    assert [r.rounded for r in res] == [True, True, False]
    (q,) = predict(log, SCHEMA, now=T0 + 3 * DAY).queries
    assert q.occurrences == 3 and q.sql == qs[2]
    cfg = PredictConfig(round_to_bins=False)
    assert not predict(log[:2], SCHEMA, now=T0 + 3 * DAY, config=cfg).queries
    assert parametrise(
        "SELECT count(*) FROM flights WHERE delay > -5 AND day = DATE '2001-01-02'"
    ) == (
        "SELECT count(*) FROM flights WHERE delay > $1 AND day = $2",
        (-5, "2001-01-02"),
    )


def test_template_bindings_records_and_render() -> None:
    tmpl = "SELECT count(*) FROM public.flights WHERE (origin = $1 AND delay >= $2)"
    assert render(tmpl, ("O'Hare", -20)) == (
        "SELECT count(*) FROM public.flights WHERE (origin = 'O''Hare' AND delay >= -20)"
    )
    log = [LogRecord(time=T0 + d * DAY, template=tmpl, bindings=("SFO", -20)) for d in range(3)]
    (q,) = predict(log, SCHEMA, now=T0 + 3 * DAY).queries
    assert q.bindings == ("SFO", -20) and q.template == tmpl


def test_cap_on_size() -> None:
    log = [
        rec(d, f"SELECT count(*) FROM flights WHERE hour = {h}")
        for h in range(10)
        for d in range(2)
    ]
    p = predict(log, SCHEMA, now=T0 + 2 * DAY, config=PredictConfig(max_statements=4))
    assert len(p.queries) == 4
    p = predict(log, SCHEMA, now=T0 + 2 * DAY, config=PredictConfig(max_rows=6))
    assert len(p.queries) == 6
    # error-aware cap: everything recurs with probability 1, so P is kept whole
    cfg = PredictConfig(epsilon=1.0, delta=1e-6, stream_length=10)
    p = predict(log, SCHEMA, now=T0 + 2 * DAY, config=cfg)
    assert len(p.queries) == 10 and set(p.ranked) == p.keys
    assert p.expected_mae is not None and p.split is not None and p.stream_length == 10
    # rare candidates (probability 1/20) in a long stream: the error-aware cap drops them
    stale = [rec(0, f"SELECT count(*) FROM flights WHERE hour = {h}") for h in range(10)] * 2
    cfg = PredictConfig(epsilon=1.0, delta=1e-6, stream_length=200)
    p = predict(stale, SCHEMA, now=T0 + 20 * DAY, config=cfg)
    assert len(p.queries) == 0
    # the ranking before the cap still holds every candidate, in the order of probability
    assert len(p.ranked) == len(set(p.ranked)) == 10


def test_windows_that_repeat_unevenly_widen_the_caps_error() -> None:
    """The log's windows repeat unevenly (a dashboard on even days, new questions on odd
    days): a P gains in the held-out windows that ask the dashboard and loses in the others.
    The cap judges a P by its mean gain against its error, which holds the spread of the
    gains over the windows: wider here than on a log whose windows all repeat alike."""
    from rewriter.predict_cap import MODEL_ERROR, Policy

    dash = [f"SELECT count(*) FROM flights WHERE hour = {h}" for h in range(24)]
    uneven = [rec(d, q) for d in range(0, 8, 2) for q in dash]
    uneven += [rec(d, f"SELECT count(*) FROM flights WHERE origin = 'JFK' AND hour = {d}")
               for d in range(1, 8, 2)]  # fmt: skip
    steady = [rec(d, q) for d in range(8) for q in dash]
    cfg = PredictConfig(epsilon=1.0, delta=1e-6, instances=False)
    learned = [predict(log, SCHEMA, now=T0 + 8 * DAY).recurrence for log in (uneven, steady)]
    assert learned[0] is not None and learned[1] is not None
    assert learned[0].repeats["public.flights"] == (0, 24, 0, 24, 0, 24, 0)
    policy = Policy("literal", 1.0, 0.5)
    judged = []
    for log in (uneven, steady):
        d = predict(log, SCHEMA, now=T0 + 8 * DAY, config=cfg).caps["public.flights"]
        judged.append(next(j for j in d.judged if j.policy == policy))
    assert min(judged[0].gains) < 0 < max(judged[0].gains)
    assert min(judged[1].gains) > 0
    assert judged[0].error > judged[1].error >= MODEL_ERROR


def test_the_repeats_of_each_window_are_counted() -> None:
    """Users of one task joining one by one: each day asks everything asked before and a few
    new statements, so a window repeats more the longer the log (4, 8, ..., 24)."""
    hours = [f"SELECT count(*) FROM flights WHERE hour = {h}" for h in range(24)]
    airports = [f"SELECT count(*) FROM flights WHERE origin = '{o}'" for o in ("JFK", "LGA", "EWR")]
    statements = hours + airports  # 27 distinct statements, 4 more each day
    log = [rec(d, q, who=f"user{d}") for d in range(7) for q in statements[: 4 * d + 4]]
    learned = predict(log, SCHEMA, now=T0 + 7 * DAY).recurrence
    assert learned is not None
    assert learned.repeats["public.flights"] == (4, 8, 12, 16, 20, 24)


def test_the_error_model_prices_online_answers_at_their_statements_sensitivity() -> None:
    """An online answer is calibrated to its batch's sensitivity: a ``ROLLUP`` counts each row
    twice (L2 sensitivity sqrt 2, L1 2), so each of its rows gets sqrt 2 (Laplace: 2) times a
    count's noise. The model follows: the expected MAE of answering everything online, in the
    cap and in the backtest, is the counts' times the row-weighted mean sensitivity."""
    counts = [
        f"SELECT count(*) FROM flights WHERE origin = 'SFO' AND hour = {h}" for h in range(24)
    ]
    rollups = [
        f"SELECT origin, count(*) FROM flights WHERE hour = {h} GROUP BY ROLLUP (origin)"
        for h in range(24)
    ]
    for accounting, factor in (("gdp", 2**0.5), ("basic", 2**0.5), ("pure", 2.0)):
        cfg = PredictConfig(epsilon=1.0, delta=0.0 if accounting == "pure" else 1e-6,
                            accounting=accounting, stream_length=24)  # fmt: skip
        only = []
        for stmts in (counts, rollups):
            log = [rec(d, q) for d in range(3) for q in stmts]
            p = predict(log, SCHEMA, now=T0 + 3 * DAY, config=cfg)
            r = backtest(log + [rec(3.5, q) for q in stmts], T0 + 3 * DAY, SCHEMA,
                         epsilon=cfg.epsilon, delta=cfg.delta, config=cfg)  # fmt: skip
            assert p.online_only_mae is not None and r.online_only_mae is not None
            only.append((p.online_only_mae, r.online_only_mae))
        assert only[1][0] == pytest.approx(factor * only[0][0])
        assert only[1][1] == pytest.approx(factor * only[0][1])


@pytest.mark.parametrize(
    ("accounting", "weighted"), [("gdp", True), ("gdp", False), ("basic", True), ("pure", True)]
)
def test_each_template_of_p_is_priced_with_and_without_it(accounting: str, weighted: bool) -> None:
    """What ``lapras predict`` prints per template: its recurrence, its share of the budget
    and the epoch's expected MAE with and without it, priced as the cap priced P (each
    accountant; the release weighted by probability or not, as paper mode plans it). A daily
    dashboard (12 hours and a GROUP BY) among 6 new questions a day: the hours are worth most
    (the epoch is much worse without them), and the templates' shares add up to the release's
    share of the budget."""
    hours = [f"SELECT count(*) FROM flights WHERE hour = {h}" for h in range(12)]
    origins = "SELECT origin, count(*) FROM flights GROUP BY origin"
    new = [
        f"SELECT count(*) FROM flights WHERE origin = '{o}' AND hour = {h} AND delay >= {e}"
        for o in ("SFO", "LAX", "JFK")
        for h in range(24)
        for e in (-20, 0, 20, 60)
    ]
    log = [
        rec(d, q, who=f"user{d % 3}")
        for d in range(7)
        for q in [*hours, origins, *new[6 * d : 6 * d + 6]]
    ]
    cfg = PredictConfig(
        epsilon=1.0,
        delta=0.0 if accounting == "pure" else 1e-6,
        accounting=accounting,  # type: ignore[arg-type]
        weighted=weighted,
        instances=False,
    )
    p = predict(log, SCHEMA, now=T0 + 7 * DAY, config=cfg)
    assert p.split is not None and p.expected_mae is not None and p.queries
    values = template_values(p)
    assert sorted(v.template for v in values) == sorted({q.template for q in p.queries})
    assert [v.expected for v in values] == sorted((v.expected for v in values), reverse=True)
    dash = values[0]
    assert dash.template == "SELECT count(*) FROM public.flights WHERE hour = $1"
    asked = sum(q.template == dash.template for q in p.queries)
    assert (dash.asked, dash.instances, dash.windows, dash.analysts) == (asked, 0, 7, 3)
    assert asked >= 6
    assert sum(v.budget_share for v in values) == pytest.approx(p.split[0])
    for v in values:
        assert v.mae_with == pytest.approx(p.expected_mae, rel=1e-9)
        assert v.mae_without > v.mae_with if v is dash else v.mae_without < dash.mae_without
    # without the error-aware cap nothing is priced
    assert template_values(predict(log, SCHEMA, now=T0 + 7 * DAY)) == ()


def test_backtest_arithmetic() -> None:
    a = "SELECT count(*) FROM flights WHERE hour = 1"
    b = "SELECT count(*) FROM flights WHERE hour = 2"
    c = "SELECT count(*) FROM flights WHERE hour = 3"
    d = "SELECT count(*) FROM flights WHERE hour = 4"
    train = [rec(0, a), rec(1, a), rec(0, b), rec(1, b), rec(0, c), rec(1, c)]
    # later: a twice, b once, d three times (unpredicted); c never (a false positive)
    test = [rec(2.1, a), rec(2.2, a), rec(2.3, b), rec(2.4, d), rec(2.5, d), rec(2.6, d)]
    r = backtest(train + test, T0 + 2 * DAY, SCHEMA, epsilon=1.0, delta=1e-6)
    assert r.predicted == 3 and r.test == 6 and r.train == 6
    assert r.rho == pytest.approx(3 / 6)
    assert r.rho_distinct == pytest.approx(2 / 3)
    assert r.false_positives == 1 and r.false_positive_rate == pytest.approx(1 / 3)
    assert r.mae is not None and r.online_only_mae is not None and r.mae > 0
    assert "overlap rho = 0.500" in r.text()
    # the oracle case: P = exactly the later queries beats answering everything online
    r2 = backtest([*train, rec(2.1, a), rec(2.3, b), rec(2.4, c)], T0 + 2 * DAY, SCHEMA,
                  epsilon=1.0, delta=1e-6)  # fmt: skip
    assert r2.rho == 1.0 and r2.false_positives == 0
    assert r2.mae is not None and r2.online_only_mae is not None
    assert r2.mae < r2.online_only_mae


def test_parse_sql_file() -> None:
    text = (
        "-- dashboard\nSELECT origin, count(*) FROM flights GROUP BY 1;\n"
        "SELECT count(*) FROM flights WHERE origin = 'a;b';\n\n"
    )
    recs = parse_sql_file(text, time=T0, step=60)
    assert [r.sql for r in recs] == [
        "SELECT origin, count(*) FROM flights GROUP BY 1",
        "SELECT count(*) FROM flights WHERE origin = 'a;b'",
    ]
    assert recs[1].time == T0 + 60


def test_parse_pg_stat_statements() -> None:
    # the shape of `SELECT rolname, calls, query FROM pg_stat_statements JOIN pg_roles ...`
    rows = [
        {"rolname": "ana", "calls": 40, "query": "SELECT origin, count(*) FROM flights GROUP BY 1"},
        {"rolname": "ana", "calls": "12",
         "query": "SELECT count(*) FROM flights WHERE hour >= $1 AND hour < $2"},
        {"rolname": "bob", "calls": 1, "query": "SELECT count(*) FROM flights WHERE origin = $1"},
    ]  # fmt: skip
    recs = parse_pg_stat_statements(rows, time=T0)
    assert [r.calls for r in recs] == [40, 12, 1]
    assert recs[0].bindings == () and recs[1].bindings is None
    p = predict(recs, SCHEMA, now=T0 + 1)
    assert [q.sql for q in p.queries] == ["SELECT origin, count(*) FROM flights GROUP BY 1"]
    assert [(u.calls, u.attributes) for u in p.unbound] == [(12, ("hour",)), (1, ("origin",))]
    csv_text = 'query,calls\n"SELECT origin, count(*) FROM flights GROUP BY 1",3\n'
    (r,) = parse_pg_stat_statements(csv_text)
    assert r.calls == 3 and r.bindings == ()


CSVLOG = (
    '2001-01-03 09:00:01.123 UTC,"ana","flights",4242,"127.0.0.1:50000",6776f0a1.1092,1,"idle",'
    '2001-01-03 09:00:00 UTC,3/7,0,LOG,00000,"statement: SELECT origin, count(*) FROM flights '
    'WHERE hour >= 6 AND hour < 12 GROUP BY origin",,,,,,,,,"psql","client backend",,0\n'
    '2001-01-03 09:00:02.5 UTC,"ana","flights",4242,"127.0.0.1:50000",6776f0a1.1092,2,"SELECT",'
    '2001-01-03 09:00:00 UTC,3/8,0,LOG,00000,"execute <unnamed>: SELECT count(*) FROM flights '
    'WHERE origin = $1","parameters: $1 = \'SFO\'",,,,,,,,"psql","client backend",,0\n'
    '2001-01-03 09:00:03 UTC,"ana","flights",4242,"127.0.0.1:50000",6776f0a1.1092,3,"SELECT",'
    '2001-01-03 09:00:00 UTC,3/9,0,ERROR,42P01,"relation ""nope"" does not exist",,,,,,'
    '"SELECT * FROM nope",15,,"psql","client backend",,0\n'
    '2001-01-03 09:00:04 UTC,"bob","flights",4243,"127.0.0.1:50001",6776f0a2.1093,1,"idle",'
    '2001-01-03 09:00:00 UTC,4/1,0,LOG,00000,"duration: 0.512 ms  statement: SELECT count(*) '
    'FROM flights WHERE origin = \'it\'\'s\'; SELECT 1",,,,,,,,,"psql","client backend",,0\n'
    "2001-01-03 09:00:05 UTC,,,4000,,6776f0a0.fa0,1,,2001-01-03 09:00:00 UTC,,0,LOG,00000,"
    '"checkpoint starting: time",,,,,,,,,"","checkpointer",,0\n'
)


def test_parse_csvlog() -> None:
    recs = parse_csvlog(CSVLOG)
    assert len(recs) == 4
    t = dt.datetime(2001, 1, 3, 9, 0, 1, 123000, tzinfo=dt.UTC).timestamp()
    assert recs[0].time == pytest.approx(t) and recs[0].analyst == "ana"
    assert recs[0].session == "6776f0a1.1092" and recs[0].sql is not None
    assert recs[1].template == "SELECT count(*) FROM flights WHERE origin = $1"
    assert recs[1].bindings == ("SFO",)
    assert recs[2].sql == "SELECT count(*) FROM flights WHERE origin = 'it''s'"
    assert recs[3].sql == "SELECT 1" and recs[3].analyst == "bob"
    res, bad = resolve(recs, SCHEMA)
    assert bad == 1  # SELECT 1 is not a DP statement
    assert all(r.plan is not None for r in res) and len(res) == 3


def test_a_csvlog_with_a_long_statement_and_rows_that_are_not_times_still_reads() -> None:
    """A statement longer than the csv module's 128 KiB field limit is a record (the proxy
    accepts statements up to 16 MiB); a row whose log_time is not a time (month 13, an offset
    of 99 hours) is skipped like a row of another message; the limit is restored after."""
    import csv

    values = ", ".join(["'SFO'"] * 40_000)  # ~280 KB of SQL
    long_sql = f"SELECT count(*) FROM flights WHERE origin IN ({values})"

    def row(time: str, sql: str) -> str:
        return (
            f'{time},"ana","flights",4242,"127.0.0.1:50000",6776f0a1.1092,1,"idle",'
            f'2001-01-03 09:00:00 UTC,3/7,0,LOG,00000,"statement: {sql}",,,,,,,,,"psql",'
            '"client backend",,0\n'
        )

    before = csv.field_size_limit()
    text = (
        row("2001-13-03 09:00:01 UTC", "SELECT count(*) FROM flights")
        + row("2001-01-03 09:00:01 +99", "SELECT count(*) FROM flights")
        + row("2001-01-03 09:00:02 UTC", long_sql)
        + CSVLOG
    )
    recs = parse_csvlog(text)
    assert csv.field_size_limit() == before
    assert [r.sql for r in recs[:1]] == [long_sql]
    assert len(recs) == 1 + len(parse_csvlog(CSVLOG))
    res, bad = resolve(recs[:1], SCHEMA)
    assert bad == 0 and res[0].plan is not None


def test_flights_fixture_declaration_and_rows() -> None:
    import sql_fixtures.flights as flights
    from rewriter import load_schema

    schema = load_schema(flights.DECLARATION)
    t = schema.tables["flights"]
    assert [c for c, _ in t.columns] == list(flights.COLUMNS)
    rows = flights.rows()
    assert len(rows) == flights.ROWS and rows[0][:4] == (dt.date(2001, 1, 1), 0, 66, 1750)
    # a crossfilter refresh (brush on distance rounded to the 200-mile bins) plans on the
    # marginal of the columns it uses
    log = [
        LogRecord(time=T0 + d * DAY, sql="SELECT hour, count(*) FROM flights WHERE delay >= -20 "
                  "AND delay < 0 AND distance >= 1014.3 AND distance < 1190 GROUP BY hour")
        for d in range(2)
    ]  # fmt: skip
    (q,) = predict(log, schema, now=T0 + 2 * DAY).queries
    assert q.view == "(hour, delay, distance)" and q.reason == "rounded"
    assert q.batch.num_queries == 24
    assert q.bindings == (-20, 0, 1000, 1200)


def test_the_log_calibrates_how_likely_unseen_instances_are() -> None:
    """The slot model's instances are backtested on the log: at each earlier window, the
    instances it would have proposed from the history are checked against what the window
    asked. Analysts who keep pairing known ends anew (a Latin square of brushes, five new
    pairs a day) make the model's instances hit more often than it says; analysts who ask
    the same five pairs every day make them never hit. Both templates recur every day alike,
    so the difference in P is the calibration's."""

    def brush(a: int, b: int) -> str:
        return f"SELECT count(*) FROM flights WHERE hour >= {a} AND hour < {b}"

    starts, ends = (0, 2, 4, 6, 8), (12, 14, 16, 18, 20)
    days = range(4)
    roaming = [
        rec(d + 0.01 * i, brush(starts[i], ends[(i + d) % 5])) for d in days for i in range(5)
    ]
    fixed = [rec(d + 0.01 * i, brush(starts[i], ends[i])) for d in days for i in range(5)]
    got = {}
    for name, log in (("roaming", roaming), ("fixed", fixed)):
        p = predict(log, SCHEMA, now=T0 + 4 * DAY)
        assert p.recurrence is not None and p.recurrence.templates is not None
        got[name] = (p.recurrence, [q for q in p.queries if q.reason == "instance"])
    roam, roam_inst = got["roaming"]
    fix, fix_inst = got["fixed"]
    assert roam.instance_hits > 0 and roam.instance_rate > 1  # more often than modelled
    assert fix.instance_hits == 0 and fix.instance_rate < 0.5 and fix.instance_expected > 1
    # the roaming analysts' five pairs never asked yet are exactly its instances
    assert sorted(q.bindings for q in roam_inst) == [(0, 20), (2, 12), (4, 14), (6, 16), (8, 18)]
    assert fix_inst and max(q.probability for q in fix_inst) < 0.1 < min(
        q.probability for q in roam_inst
    )


def test_likely_unseen_instances_of_a_template_are_predicted() -> None:
    """Brushes of one range over several days: starts 6 and 8, ends 10 and 12 seen; the pair
    (8, 10) never was, but both its ends were often: it is predicted, as an instance of the
    template, below the pairs actually asked. The engine then answers it from the release."""
    import numpy as np

    from dp.engine import DecisionKind, EngineConfig, decide, start
    from dp.noise import SeededSampler

    def brush(a: int, b: int) -> str:
        return f"SELECT count(*) FROM flights WHERE hour >= {a} AND hour < {b}"

    seen = [(6, 12), (8, 12), (6, 10)]
    log = [rec(d + 0.1 * i, brush(*ab)) for d in range(4) for i, ab in enumerate(seen)]
    p = predict(log, SCHEMA, now=T0 + 4 * DAY)
    by = {q.sql: q for q in p.queries}
    (inst,) = [q for q in p.queries if q.reason == "instance"]
    assert inst.bindings == (8, 10) and inst.occurrences == 0
    assert 0 < inst.probability < min(q.probability for q in p.queries if q.reason == "exact")
    assert len(by) == 4
    without = predict(log, SCHEMA, now=T0 + 4 * DAY, config=PredictConfig(instances=False))
    assert {q.reason for q in without.queries} == {"exact"}
    # the instance is in P: the epoch answers it from the Matrix Mechanism release
    (v,) = p.views
    state, _ = start(
        EngineConfig(epsilon=1.0, delta=1e-6, stream_length=10),
        v.batch.domain,
        [v.batch],
        np.ones(v.batch.domain.size),
        SeededSampler(3),
    )
    assert decide(state, inst.batch).kind is DecisionKind.MATRIX


def test_csv_sources_read_with_any_line_ending() -> None:
    """CR LF (a log copied through Windows) and bare CR line ends are rows, as LF is."""
    assert len(parse_csvlog(CSVLOG.replace("\n", "\r\n"))) == len(parse_csvlog(CSVLOG))
    assert len(parse_csvlog(CSVLOG.replace("\n", "\r"))) == len(parse_csvlog(CSVLOG))
    text = 'query,calls\r"SELECT origin, count(*) FROM flights GROUP BY 1",3\r'
    (r,) = parse_pg_stat_statements(text)
    assert r.calls == 3 and r.template == "SELECT origin, count(*) FROM flights GROUP BY 1"


def test_a_pg_stat_statements_export_with_a_long_query_reads() -> None:
    """The export's query column holds the whole normalised text: past the csv module's
    128 KiB limit too; an empty export is no rows."""
    long_query = "SELECT count(*) FROM flights WHERE origin IN (" + ", ".join(["$1"] * 40_000) + ")"
    (r,) = parse_pg_stat_statements(f'query,calls\n"{long_query}",2\n')
    assert r.template == long_query and r.calls == 2
    assert parse_pg_stat_statements("") == []
