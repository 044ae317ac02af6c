"""Accuracy on request, on the proxy's side: ``lapras.max_error`` and the cost preview.

**The setting.** ``SET lapras.max_error = 50`` (or ``'5%'``, or ``off``) states the largest
standard error the analyst accepts for each value a DP statement measures: a **standard error**
(not a confidence half-width), in the **units of a count** -- a count's standard error, and a
sum's divided by the largest absolute value one row adds to it (its public scale: the summed
expression's largest absolute value over the declared domain). ``'p%'`` is p percent of the
table's declared ``public_rows``. A table's declaration may give a default (``max_error``),
which the session's setting overrides (``off`` included). The value is tracked in the client's
session (:mod:`proxy.wire.settings`, relayed too) and checked before it is relayed: an invalid
one is refused with 22023, an unknown ``lapras.*`` name with 42704.

**The preview.** ``EXPLAIN <DP statement>`` (without ``ANALYZE``) and ``SELECT
lapras.cost('<DP statement>')`` are answered by the proxy from the epoch's public state
(``dp.engine.preview``): how the statement would be answered, what it would cost, the standard
error its answer would have, or why it would be refused -- and nothing is charged, drawn or
stored; the stream position does not move. The backend's EXPLAIN of a statement over a
protected table stays refused (its estimates come from the data).

Everything here is public: the request, the statements, and the epoch's bookkeeping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import rewriter
from dp import engine
from dp.accuracy import parse_max_error
from dp.errors import LaprasError, PrivacyParameterError
from proxy.wire.router import Column
from proxy.wire.settings import Change, SessionSettings
from proxy.wire.types import FLOAT8, TEXT
from rewriter import wrappers
from rewriter.schema import TableDecl

#: The session setting of a requested standard error.
MAX_ERROR = "lapras.max_error"
#: The ``lapras.*`` settings the proxy knows.
KNOWN = (MAX_ERROR,)


class UnknownSetting(LaprasError):
    """42704 undefined_object: a ``lapras.*`` setting the proxy does not know."""

    sqlstate = "42704"


def check_setting(change: Change) -> None:
    """Refuse a ``lapras.*`` change the proxy cannot honour (before it is relayed)."""
    if change.kind == "reset_all":
        return
    if change.name not in KNOWN:
        raise UnknownSetting(
            f'unrecognized configuration parameter "{change.name}"',
            hint=f"the proxy's settings: {', '.join(KNOWN)}",
        )
    if change.kind in ("set", "local"):
        parse_max_error(change.value)


def requested(settings: SessionSettings | None, table: TableDecl) -> float | None:
    """The standard error a session asks of a statement over ``table`` (in the units of a
    count), or None: the session's ``lapras.max_error``, else the table's default."""
    raw = settings.get(MAX_ERROR) if settings is not None else None
    value = table.max_error if raw is None else parse_max_error(raw)
    if value is None:
        return None
    resolved = value.resolve(table.public_rows)
    if resolved is None:
        raise PrivacyParameterError(
            f"lapras.max_error = {value} is a percentage of the public size of table "
            f"{table.name}, which its declaration does not give",
            hint="give lapras.max_error as a standard error (a number), or declare the "
            "table's public_rows in lapras.toml",
        )
    return resolved


# ---------------------------------------------------------------------------- the preview

PreviewKind = Literal["explain", "cost"]

_COST = re.compile(
    r"^\s*SELECT\s+lapras\.cost\s*\(\s*(?:'(?P<q>(?:[^']|'')*)'|\$\$(?P<d>.*?)\$\$)\s*\)"
    r"(?:\s+(?:AS\s+)?(?P<alias>[a-z_][a-z0-9_]*))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def preview_target(sql: str) -> tuple[PreviewKind, str] | None:
    """The statement a preview asks about: ``EXPLAIN <stmt>`` (no ANALYZE) or ``SELECT
    lapras.cost('<stmt>')``; None for anything else."""
    m = _COST.match(sql)
    if m is not None:
        inner = m["q"].replace("''", "'") if m["q"] is not None else m["d"]
        return "cost", inner.strip().rstrip(";")
    if sql.lstrip()[:7].lower() != "explain":
        return None
    loc = wrappers.locate(sql)
    if loc is None or loc.kind != "explain":
        return None
    if any(t.kind == "word" and t.value in ("analyze", "analyse") for t in loc.head):
        return None  # it would run the statement: refused as before
    return "explain", sql[loc.start : loc.end]


@dataclass(frozen=True, slots=True)
class PreviewPlan:
    """A preview's route plan: which form, and the DP statement it is about."""

    kind: PreviewKind
    statement: rewriter.DPStatement


EXPLAIN_COLUMNS = (Column(name="QUERY PLAN", type_oid=TEXT),)
COST_COLUMNS = (
    Column(name="answered_from", type_oid=TEXT),
    Column(name="cost", type_oid=FLOAT8),
    Column(name="unit", type_oid=TEXT),
    Column(name="standard_error", type_oid=FLOAT8),
    Column(name="max_error", type_oid=FLOAT8),
    Column(name="budget_left", type_oid=FLOAT8),
    Column(name="refused", type_oid=TEXT),
)

_FROM = {
    engine.DecisionKind.REPEAT: "a repeat of an earlier answer",
    engine.DecisionKind.MATRIX: "the Matrix Mechanism release of the predicted queries",
    engine.DecisionKind.STORED: "earlier releases",
    engine.DecisionKind.FRESH: "fresh noise",
}


def _source(kind: engine.DecisionKind | None, reveal: bool) -> str | None:
    if kind is None:
        return None
    if kind is engine.DecisionKind.FRESH or reveal:
        return _FROM[kind]
    return "earlier releases"  # (whether predicted or a repeat is not told: reveal_sources)


def _range(errors: tuple[float, ...]) -> str:
    lo, hi = min(errors), max(errors)
    return f"{hi:.4g}" if hi - lo <= 1e-6 * max(hi, 1e-300) else f"{lo:.4g} to {hi:.4g}"


def preview_rows(
    kind: PreviewKind, p: engine.Preview, max_error: float | None, *, reveal: bool
) -> tuple[tuple[object, ...], ...]:
    """The rows of a preview (:data:`EXPLAIN_COLUMNS` or :data:`COST_COLUMNS`)."""
    st = p.status
    assert st is not None
    left = max(st.total - st.spent, 0.0)
    source = _source(p.kind, reveal)
    worst = max(p.std_errors) if p.std_errors else 0.0
    refused = None if p.refusal is None else p.refusal.message
    if kind == "cost":
        return ((source, p.charge, st.unit, None if refused else worst, max_error, left, refused),)
    lines = ["LAPRAS cost preview (nothing is charged, nothing is answered)"]
    if p.refusal is not None:
        lines.append(f"  Refused ({p.refusal.sqlstate}): {p.refusal.message}")
        if p.refusal.hint:
            lines.append(f"  Hint: {p.refusal.hint}")
    else:
        how = "one online release" if p.kind is engine.DecisionKind.FRESH else "no budget spent"
        lines.append(f"  Answered from: {source} ({how})")
        share = f" ({100 * p.charge / left:.2g}% of it)" if left > 0 and p.charge > 0 else ""
        lines.append(f"  Cost: {p.charge:.4g} {st.unit} of the {left:.4g} {st.unit} left{share}")
        if p.std_errors:
            lines.append(
                f"  Standard error: {_range(p.std_errors)} per value, in the units of a count "
                "(a sum's is this times its column's largest absolute value)"
            )
    if max_error is not None:
        lines.append(f"  Requested: lapras.max_error = {max_error:.4g} (a standard error)")
    nxt = "none" if st.next_std_error is None else f"{st.next_std_error:.4g}"
    lines.append(f"  Now: a count answered by the next fresh answer has standard error {nxt}")
    return tuple((line,) for line in lines)


def public_preview_rows(
    kind: PreviewKind, max_error: float | None
) -> tuple[tuple[object, ...], ...]:
    """The preview of a statement answered from the declared values alone (``SELECT DISTINCT
    col``): free and exact."""
    source = "the declared public values"
    if kind == "cost":
        return ((source, 0.0, None, 0.0, max_error, None, None),)
    return (
        ("LAPRAS cost preview (nothing is charged, nothing is answered)",),
        (f"  Answered from: {source} (no budget spent, exact)",),
    )
