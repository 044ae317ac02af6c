"""Answering a composed statement: its releases in order, each through the one-statement path.

A :class:`rewriter.Composed` statement is a small plan (rewriter/compose.py): DP releases, each
an ordinary DP statement's plan, and post-processing over their rows. Here the plan is driven:
each release the plan yields is answered by :meth:`proxy.epochs.EpochService.answer` exactly
as if it had been sent alone -- decided, charged before its release and stored, a repeat
answered from the stored answer -- and logged in the query log as its own template; then the
next part is planned (it may depend on the released values), and finally the rows are made.
A refusal of any release (the budget, no epoch) refuses the statement, naming the release in
the error's DETAIL; the releases before it stay spent and stored (a retry answers them from
the stored answers). The rewriter's work runs in the answering worker thread (``off_loop``).

One NOTICE tells the whole plan: how many releases, how each was answered, the plan's total
cost, and each release's standard errors (public noise scales and noisy answers only).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any

import numpy as np

import rewriter
from dp import engine
from dp.errors import LaprasError
from proxy.epochs import Answer
from proxy.wire.router import Notice
from rewriter.compose import Released, Result

#: Each release's statement, as the NOTICE and a refusal's DETAIL name it, is cut here.
LABEL_CHARS = 120


async def answer(
    statement: rewriter.Composed,
    schema: rewriter.Schema,
    release: Callable[[rewriter.Plan], Awaitable[Answer]],
    off_loop: Callable[..., Awaitable[Any]],
    log: Callable[[rewriter.Plan, str], None],
    *,
    reveal: bool = False,
    params: Sequence[object] = (),
    param_oids: Sequence[int] = (),
) -> tuple[tuple[tuple[object, ...], ...], Notice]:
    """The rows and the NOTICE of a composed statement: ``release`` answers each release's
    plan (the one-statement path), ``off_loop`` runs the rewriter's work in a worker thread,
    ``log`` records each release in the query log (its plan and outcome); ``params``: the
    values of its ``$n`` and their types."""
    gen = rewriter.steps(statement, schema, params, param_oids)
    done: list[tuple[rewriter.Plan, Answer]] = []
    step = await off_loop(_advance, gen, None)
    while isinstance(step, rewriter.Plan):
        plan = step
        try:
            got = await release(plan)
        except LaprasError as e:
            log(plan, "refused")
            gen.close()
            e.detail = _part(len(done) + 1, plan) + (f" {e.detail}" if e.detail else "")
            raise
        log(plan, got.kind.value)
        done.append((plan, got))
        answers = Released(
            answers=np.asarray(got.answers, dtype=np.float64),
            std_errors=np.asarray(got.std_errors, dtype=np.float64),
        )
        step = await off_loop(_advance, gen, answers)
    result: Result = step
    return result.rows, describe(done, reveal=reveal)


def _advance(gen: Generator[rewriter.Plan, Released, Result], value: Released | None) -> object:
    """The plan's next release, or its result when there is none left."""
    try:
        return next(gen) if value is None else gen.send(value)
    except StopIteration as stop:
        return stop.value


def _label(plan: rewriter.Plan) -> str:
    text = plan.fingerprint.template
    for i, v in reversed(list(enumerate(plan.fingerprint.bindings))):
        text = text.replace(f"${i + 1}", repr(v) if isinstance(v, str) else str(v))
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 3] + "..."


def _part(k: int, plan: rewriter.Plan) -> str:
    return f"Release {k} of this statement ({_label(plan)}) was refused."


def describe(done: list[tuple[rewriter.Plan, Answer]], *, reveal: bool = False) -> Notice:
    """The NOTICE of a composed answer: its releases, how each was answered, the total cost,
    each release's standard errors; the budget status in the DETAIL."""
    if not done:
        return Notice(
            message="LAPRAS: a plan answered from the declared public values of the columns "
            "(no budget spent)."
        )
    fresh = sum(1 for _, a in done if a.kind is engine.DecisionKind.FRESH)
    kinds = []
    if fresh:
        kinds.append(f"{fresh} answered online with fresh noise")
    if reveal:
        for kind in (
            engine.DecisionKind.MATRIX,
            engine.DecisionKind.STORED,
            engine.DecisionKind.REPEAT,
        ):
            k = sum(1 for _, a in done if a.kind is kind)
            if k:
                kinds.append(f"{k} {_REVEALED[kind]}")
    elif len(done) - fresh:
        kinds.append(f"{len(done) - fresh} answered from earlier releases")
    last = done[-1][1].status
    total = sum(a.charge for _, a in done)
    spent = f"spent {total:.4g} {last.unit} in all" if total > 0 else "no budget spent"
    errors = []
    for k, (plan, a) in enumerate(done, start=1):
        names = [c.name for c in plan.columns]
        per = [
            f"{label} {_range(low, high)}"
            for label, low, high in rewriter.aggregate_errors(plan, a.answers, a.std_errors, names)
        ] + [
            f"95% interval {text}"  # MIN, MAX, percentiles, COUNT(DISTINCT): their own
            for text in rewriter.histogram_intervals(plan, a.answers, a.std_errors, names)
        ]
        errors.append(f"release {k} ({_label(plan)}): " + (", ".join(per) or "no aggregate"))
    plural = "s" if len(done) > 1 else ""
    message = (
        f"LAPRAS: a plan of {len(done)} release{plural} combined by post-processing "
        f"({'; '.join(kinds)}); {spent}; standard error {'; '.join(errors)}."
    )
    detail = (
        f"Budget spent {last.spent:.4g} of {last.total:.4g} {last.unit} "
        f"({100 * last.spent / last.total:.1f}%); online releases {last.online_releases} of "
        f"{last.stream_length}; stream position {last.position}."
    )
    return Notice(message=message, detail=detail)


_REVEALED = {
    engine.DecisionKind.MATRIX: "from the Matrix Mechanism release of the predicted queries",
    engine.DecisionKind.STORED: "from earlier releases",
    engine.DecisionKind.REPEAT: "repeats of earlier answers",
}


def _range(low: float, high: float) -> str:
    return f"{high:.4g}" if high - low <= 1e-6 * max(high, 1e-300) else f"{low:.4g} to {high:.4g}"
