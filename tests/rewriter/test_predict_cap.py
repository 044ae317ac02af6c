"""rewriter.predict_cap: P kept only where a held-out backtest says it answers better."""

from __future__ import annotations

import datetime as dt

import pytest

from dp.domain import Domain, QueryBatch
from rewriter import parse_schema
from rewriter.predict import DAY, LogRecord, PredictConfig, predict, template_values
from rewriter.predict_cap import (
    NO_GAIN,
    NO_ORIGIN,
    SHARES,
    EpochModel,
    Policy,
    split_for,
    window_error,
)

SCHEMA = parse_schema(
    """
[tables.flights]
schema = "public"
[tables.flights.columns]
hour = "integer"
delay = "integer"
origin = "text"
[tables.flights.attributes.hour]
kind = "integer"
min = 0
max = 23
[tables.flights.attributes.delay]
kind = "integer"
edges = [-60, -20, 0, 20, 60, 600]
[tables.flights.attributes.origin]
kind = "categorical"
values = ["SFO", "LAX", "JFK"]
""",
    "test.toml",
)
T0 = dt.datetime(2001, 1, 1, 9, 0, tzinfo=dt.UTC).timestamp()
CAP = PredictConfig(epsilon=1.0, delta=1e-6, instances=False)


def rec(day: float, sql: str, who: str = "ana") -> LogRecord:
    return LogRecord(time=T0 + day * DAY, analyst=who, sql=sql)


DASHBOARD = [f"SELECT count(*) FROM flights WHERE hour = {h}" for h in range(12)]


def test_a_dashboard_asked_every_day_is_kept_and_the_literal_log_is_weighed() -> None:
    """Twelve statements every day: at each held-out day the literal log covers the window,
    so a P gains well over the model's error and is kept, with E the fresh answers left (one a
    day: the one-off) and S the busiest day's statements x 1.5."""
    log = [rec(d, q) for d in range(6) for q in DASHBOARD]
    log += [rec(d + 0.5, f"SELECT count(*) FROM flights WHERE origin = 'JFK' AND hour = {d}")
            for d in range(6)]  # fmt: skip
    p = predict(log, SCHEMA, now=T0 + 6 * DAY, config=CAP)
    d = p.caps["public.flights"]
    assert d.reason == "kept" and d.policy is not None and d.best is not None
    assert d.text.startswith("P kept: ")
    assert len(d.origins) == 4 and len(d.best.gains) == 4
    assert d.best.mean > d.best.error > 0
    assert set(DASHBOARD) <= {q.sql for q in p.queries}
    # every earlier statement, at every share, is among the candidates the cap weighed
    weighed = {j.policy for j in d.judged}
    assert {Policy("literal", 1.0, m) for m in SHARES} <= weighed
    assert p.split == split_for(d.policy.share)
    assert (p.stream_length, p.expected_fresh) == (20, d.expected_fresh)
    assert d.expected_fresh < d.online_expected_fresh
    assert p.expected_mae is not None and p.online_only_mae is not None
    assert p.expected_mae < p.online_only_mae
    # what each template is worth: the dashboard's, much; the shares add up to the release's
    values = template_values(p)
    assert sum(v.budget_share for v in values) == pytest.approx(p.split[0])
    dash = next(v for v in values if v.template.endswith("WHERE hour = $1"))
    assert dash.asked == 12 and dash.mae_with == pytest.approx(p.expected_mae)
    assert dash.mae_without > dash.mae_with


def test_an_exploratory_log_keeps_no_prediction_and_says_so() -> None:
    """New questions every day (each asked on one day only): no P answers a held-out day
    better than answering it online, so P is empty and the decision says why."""
    log = [
        rec(d, f"SELECT count(*) FROM flights WHERE hour = {h} AND delay >= {e}")
        for d, e in zip(range(6), (-60, -20, 0, 20, 60, -60), strict=True)
        for h in range(d % 2 * 12, d % 2 * 12 + 12)
    ]
    p = predict(log, SCHEMA, now=T0 + 6 * DAY, config=CAP)
    d = p.caps["public.flights"]
    assert p.queries == () and d.policy is None and d.reason == "no-gain"
    assert d.text.startswith(NO_GAIN)
    assert d.best is not None and d.best.score <= 0
    assert p.expected_mae == p.online_only_mae
    assert p.expected_fresh == d.online_expected_fresh == p.stream_length // 3 * 2
    # no statement was ever asked again: the ranking holds none (probability 0), and the
    # best candidate weighed was the literal log, which lost too
    assert p.ranked == () and d.best.policy.source == "literal" and d.best.mean < 0


def test_a_log_of_one_window_cannot_be_backtested() -> None:
    log = [rec(0.1 * i, q) for i, q in enumerate(DASHBOARD)]
    p = predict(log, SCHEMA, now=T0 + 1.5, config=CAP)
    d = p.caps["public.flights"]
    assert p.queries == () and d.reason == "no-origin" and d.text == NO_ORIGIN


def test_the_window_is_answered_as_the_engine_answers_it() -> None:
    """``window_error``: a statement of P from the release while the release is the more
    accurate, else fresh at the steady pacing; fresh answers beyond S refused; with P empty
    the release's share is spent online, so every fresh answer is more accurate."""
    dom = Domain.of(("x", 4))
    batches = [QueryBatch.from_dense(dom, [[1.0 if j == i else 0.0 for j in range(4)]])
               for i in range(4)]  # fmt: skip
    stream = [(("t", "v", str(i)), b) for i, b in enumerate(batches)]
    model = EpochModel(epsilon=1.0, delta=1e-6)
    split = split_for(0.5)
    online = window_error(model, stream, {}, split, stream_length=4, expected=4)
    assert (online.fresh, online.released, online.refused) == (4, 0, 0)
    short = window_error(model, stream, {}, split, stream_length=2, expected=2)
    assert (short.fresh, short.refused, short.rows) == (2, 2, 2)
    import numpy as np

    precise = {stream[0][0]: np.array([1e-6])}
    vague = {stream[0][0]: np.array([1e12])}
    got = window_error(model, stream, precise, split, stream_length=4, expected=3)
    assert (got.released, got.fresh) == (1, 3) and got.mae < online.mae * 2
    got = window_error(model, stream, vague, split, stream_length=4, expected=4)
    assert (got.released, got.fresh) == (0, 4)
    # with a release, the online pool is half the budget: fresh answers are noisier
    assert got.mae > online.mae
