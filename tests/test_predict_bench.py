"""bench/predict on one small window per dataset: structural facts of the harness, not speed.

For each dataset (Crossfilter flights, movies, weather; IDEBench flights) the test replays two
sessions of one analyst (the smallest one with an earlier session, and that earlier one), and
checks: every replayed statement plans through the rewriter or is refused for the declared
``cell_limit`` (54000) and nothing else; the log's timestamps (one session per day, the
analyst on every record); the literal baseline (at most 2S statements, the most recent first)
and its overlap against a count by hand; the product's overlap against ``evaluate``'s; the
oracle's overlap is 1 and the engine answers it from the release (IDEBench: but the
GROUP BYs too large for a block of the release); refusals are counted (a
stream longer than S is refused beyond S, and answered + refused is the stream).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.predict import datasets as D
from bench.predict import replay as R
from bench.predict import run
from rewriter import Refused, classify
from rewriter.predict import DAY, PredictConfig, evaluate
from rewriter.predict_cap import split_for

#: The engine runs answer the window's first STREAM statements of at most ROWS rows (enough
#: for the structure; IDEBench's GROUP BYs of hundreds of rows make slow releases).
STREAM, ROWS = 12, 64


def _pair(name: str) -> list[R.Session]:
    """The smallest session with an earlier session of its analyst, and that one."""
    ds = D.dataset(name)
    files = D.trace_files(name)

    def meta(p: Path) -> tuple[str, int]:
        stem = p.name.split(".")[0]
        if name == D.IDEBENCH:
            kind, _, index = stem.rpartition("_")
            return kind, int(index)
        user, _, task, *_ = p.name.split("_")
        return user[:8], int(task)

    replay = R.idebench_session if name == D.IDEBENCH else R.crossfilter_session
    by_key = {meta(p): p for p in files}
    cands = [(a, t) for a, t in by_key if t >= 1 and (a, t - 1) in by_key]
    sizes = {k: len(replay(ds, by_key[k]).queries) for k in cands}
    a, t = min(cands, key=lambda k: (sizes[k], k))
    return [replay(ds, by_key[(a, t - 1)]), replay(ds, by_key[(a, t)])]


@pytest.fixture(scope="module", params=D.DATASETS)
def data(request: pytest.FixtureRequest) -> run.Data:
    name = request.param
    ds = D.dataset(name)
    schema = D.schema(ds)
    return run.Data(name, ds, schema, D.pin(ds, schema), _pair(name))


_WINDOWS: dict[str, run.Window] = {}


def _window(data: run.Data) -> run.Window:
    if data.name not in _WINDOWS:
        run._DATA[data.name] = data
        [unit] = run.units(data, "same-user")
        assert unit.train == ((0, 0),) and unit.test == 1 and unit.test_day == 1
        # the harness's structure, not the product's P: the predictor without its (slow) cap
        _WINDOWS[data.name] = run.window(unit, PredictConfig())
    return _WINDOWS[data.name]


def test_replayed_sql_plans_or_is_over_the_cell_limit(data: run.Data) -> None:
    planned = 0
    for sql in R.distinct_sql(data.sessions):
        got = data.resolver(data.sessions[0]).statement(sql)
        if got is not None and got[2] is not None:
            planned += 1
            continue
        [st] = classify(sql, data.schema)
        assert isinstance(st, Refused), sql
        assert st.error.sqlstate == "54000", (sql, st.error)  # the declared cell_limit only
    assert planned > 0


def test_the_log_looks_like_a_query_log(data: run.Data) -> None:
    recs = [run.records(s, d) for d, s in enumerate(data.sessions)]
    for d, rs in enumerate(recs):
        days = {int((float(r.time) - run.T0) // DAY) for r in rs}
        assert days == {d}
        assert [float(r.time) for r in rs] == sorted(float(r.time) for r in rs)
        assert {r.analyst for r in rs} == {data.sessions[d].analyst} and rs[0].analyst
        assert len({r.session for r in rs}) == 1


def test_literal_baseline_and_overlaps(data: run.Data) -> None:
    w = _window(data)
    s = len(w.stream.idents)
    assert s > 0 and len(set(w.stream.idents)) == s
    # the literal baseline: distinct statements of the log, most recent first, at most 2S
    train_idents = {r.ident for r in w.train if r.ident is not None}
    assert len(w.literal) == min(len(train_idents), 2 * s)
    assert len({r.ident for r in w.literal}) == len(w.literal)
    times = [r.time for r in w.literal]
    assert times == sorted(times, reverse=True)
    lit = {r.ident for r in w.literal}
    by_hand = len([k for k in w.stream.idents if k in lit]) / s
    assert run.overlap(w.stream, (r.ident for r in w.literal if r.ident)) == pytest.approx(by_hand)
    # the product's overlap is the predictor's own (evaluate, over the window's records)
    later = [
        r
        for rec in run.records(data.sessions[1], 1)
        if (r := data.resolver(data.sessions[1]).record(rec)) is not None
    ]
    report = evaluate(w.prediction, later)
    assert run.overlap(w.stream, w.prediction.keys) == pytest.approx(report.rho_distinct)
    # the oracle
    assert run.overlap(w.stream, w.stream.idents) == 1.0


def test_engine_runs_count_refusals_and_the_oracle_is_answered_from_the_release(
    data: run.Data,
) -> None:
    w = _window(data)
    stream = [b for b in w.stream.batches if b.num_queries <= ROWS][:STREAM]
    s = len(stream)
    seed = run.session_seed(1, data.sessions[1])
    oracle = run.engine_run(data.pin, stream, stream, seed)
    assert not oracle.error
    assert oracle.refused == 0 and oracle.answered == s
    # P's statements come from the release, but where a fresh answer at the pacing would be
    # more accurate (default mode) and, on IDEBench, its largest GROUP BYs that do not fit a
    # block of the release (dp.marginals.MAX_BLOCK_ENTRIES)
    assert oracle.matrix >= 1
    online = run.engine_run(data.pin, stream, [], seed)
    assert not online.error and online.answered + online.refused == s and online.matrix == 0
    # S smaller than the stream: the engine refuses what no longer fits, and it is counted
    short = run.engine_run(data.pin, stream, [], seed, stream_length=max(1, s // 3))
    assert short.refused >= 1 and short.answered + short.refused == s
    assert short.rows > 0 and short.mae == short.mae  # answered rows have an MAE (not nan)
    literal = [r.plan.batch for r in w.literal if r.plan and r.plan.batch.num_queries <= ROWS]
    literal = literal[: 2 * s]
    lit = run.engine_run(data.pin, stream, literal, seed)
    assert not lit.error and lit.answered + lit.refused == s


def test_the_oracle_bound_keeps_the_best_run_that_refuses_no_more_than_online(
    data: run.Data,
) -> None:
    """``Row.oracle_best`` (``run.best_fitting``): the oracle P at several MM shares; the bound
    is the least MAE among the runs refusing no more than online, and a run that refused more
    (here: a planned S shorter than the stream) never counts."""
    w = _window(data)
    stream = [b for b in w.stream.batches if b.num_queries <= ROWS][:STREAM]
    seed = run.session_seed(1, data.sessions[1])
    online = run.engine_run(data.pin, stream, [], seed)
    short = run.engine_run(data.pin, stream, [], seed, stream_length=max(1, len(stream) // 3))
    runs = [(run.engine_run(data.pin, stream, stream, seed, split_for(m)), m) for m in (0.125, 0.9)]
    assert online.refused == 0 and short.refused >= 1
    assert all(not r.error and r.refused == 0 for r, _ in runs)
    got = run.best_fitting([*runs, (short, 0.5)], online)
    assert got is not None and got[1] in (0.125, 0.9)
    assert got[0].mae == min(r.mae for r, _ in runs)
    assert run.best_fitting([(short, 0.5)], online) is None
