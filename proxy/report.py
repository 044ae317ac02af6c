"""``lapras report``: a picture of one epoch, drawn from the ledger's public events.

The report reads an epoch's events (:meth:`proxy.ledger.PgLedger.events`), replays them through
the engine (:func:`dp.engine.apply`, the same fold the proxy does) and draws three panels:

1. **budget over the stream**: what the Matrix Mechanism release spent, what the online answers
   spent, what is left in the online pools and in the reserve, at each stream position;
2. **the estimator**: ``B_hat(b)`` at each unpredicted ("bad") query and the frozen ``B_est``
   (``dp.pacing.b_hat``), against the number of bad queries seen so far; under the Steady
   pacing, the expected number of fresh answers E in place of ``B_est``;
3. **standard errors**: the standard error of every answer by stream position, by how it was
   answered (Matrix Mechanism release, stored releases, fresh noise);
4. **overlap**: the share of the statements answered so far that were in P (answered from the
   Matrix Mechanism release), against the overlap the prediction expected when one is given
   (``lapras report --prediction``: the sum of P's probabilities over the S it predicted).

Only public values are used: charges, noise scales, standard errors, positions and the
configuration -- never the pinned histogram and not even the noisy answers. Exact repeats do
not appear (they leave no event). The pure part (:func:`timeline`) is separate from drawing
(:func:`png_bytes`, matplotlib imported lazily: ``pip install -e '.[report]'``) and from
the one database read (:func:`load_epoch`).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dp import engine
from dp.errors import LaprasError
from dp.pacing import Allocation, Pool, b_hat
from proxy.epochs import coverage
from proxy.ledger import EpochRow, PgLedger

#: The PNG's size: FIGSIZE inches at DPI dots per inch.
FIGSIZE = (10.0, 14.0)
DPI = 100


class ReportError(LaprasError):
    """The report cannot be made (no such epoch, matplotlib missing, an empty epoch)."""

    sqlstate = "55000"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetPoint:
    """The budget after the statement at ``position`` (position 0: after the epoch's start)."""

    position: int
    matrix: float
    online: float
    pools: float
    reserve: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BadQuery:
    """The b-th unpredicted query, at stream ``position``; ``b_hat`` is the running estimate."""

    position: int
    b: int
    b_hat: float
    fresh: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerPoint:
    """One answered statement: how (``matrix``, ``stored`` or ``fresh``), its standard errors."""

    position: int
    source: str
    std_errors: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """Everything the report shows about one epoch, extracted from its events."""

    config: engine.EngineConfig
    status: engine.BudgetStatus
    budget: tuple[BudgetPoint, ...]
    bad: tuple[BadQuery, ...]
    answers: tuple[AnswerPoint, ...]
    b_est: float | None = None
    b_est_position: int | None = None
    #: The overlap the epoch's prediction expected (None: not known).
    predicted_overlap: float | None = None

    def overlap(self) -> list[tuple[int, float]]:
        """The realised overlap after each answered statement: (position, share so far of the
        answered statements that came from the Matrix Mechanism release)."""
        out: list[tuple[int, float]] = []
        good = 0
        for i, a in enumerate(sorted(self.answers, key=lambda a: a.position), start=1):
            good += a.source == "matrix"
            out.append((a.position, good / i))
        return out


def timeline(events: Iterable[object]) -> Timeline:
    """Replay an epoch's events (in ledger order) and collect the public series."""
    state: engine.EngineState | None = None
    matrix = online = 0.0
    budget: list[BudgetPoint] = []
    bad: list[BadQuery] = []
    answers: list[AnswerPoint] = []
    b_est: float | None = None
    b_est_position: int | None = None

    def snapshot(st: engine.EngineState) -> None:
        p = st.pacing
        point = BudgetPoint(
            position=st.position,
            matrix=matrix,
            online=online,
            pools=p.warmup_pool + p.bad_pool,
            reserve=p.reserve,
        )
        if budget and budget[-1].position == point.position:
            budget[-1] = point
        else:
            budget.append(point)

    config: engine.EngineConfig | None = None
    for ev in events:
        if isinstance(ev, engine.EpochStarted):
            # The report needs the accountant and the pacing, not the stored-release inference
            # (an eigendecomposition per release): replay without it.
            config = ev.config
            ev = replace(ev, config=replace(ev.config, reuse=False))
        state = engine.apply(state, ev)  # type: ignore[arg-type]
        if isinstance(ev, engine.Charged):
            if ev.pool is Pool.MATRIX:
                matrix += ev.amount
            else:
                online += ev.amount
                bad.append(
                    BadQuery(
                        position=ev.position,
                        b=ev.b,
                        b_hat=b_hat(ev.b, ev.position, state.config.stream_length),
                        fresh=True,
                    )
                )
        elif isinstance(ev, engine.Released):
            answers.append(
                AnswerPoint(position=ev.position, source="fresh", std_errors=ev.std_errors)
            )
        elif isinstance(ev, engine.Answered):
            answers.append(
                AnswerPoint(position=ev.position, source=ev.source.value, std_errors=ev.std_errors)
            )
            if ev.b is not None:
                bad.append(
                    BadQuery(
                        position=ev.position,
                        b=ev.b,
                        b_hat=b_hat(ev.b, ev.position, state.config.stream_length),
                        fresh=False,
                    )
                )
        if b_est is None and state.pacing.b_est is not None:
            b_est, b_est_position = state.pacing.b_est, state.position
        elif b_est is None and state.config.allocation_kind is Allocation.STEADY:
            # Steady pacing: no estimate is frozen; the expected number of fresh answers E
            # is known from the start
            b_est, b_est_position = float(state.config.expected), 0
        if not isinstance(ev, engine.EpochStarted):
            snapshot(state)
    if state is None or config is None:
        raise ReportError("the epoch has no events", hint="is the epoch id right?")
    return Timeline(
        config=config,
        status=engine.status(state),
        budget=tuple(budget),
        bad=tuple(bad),
        answers=tuple(answers),
        b_est=b_est,
        b_est_position=b_est_position,
    )


# -- reading the ledger ------------------------------------------------------------------------


async def load_epoch(
    dsn: str, table: str, epoch_id: int | None = None
) -> tuple[EpochRow, list[object]]:
    """The epoch's row and its events: the active epoch of ``table``, or epoch ``epoch_id``."""
    ledger = await PgLedger.connect(dsn)
    try:
        if epoch_id is None:
            row = await ledger.active_epoch(table)
            if row is None:
                raise ReportError(
                    f"no active epoch on table {table}",
                    hint="give a closed epoch with --epoch N (lapras epoch show lists the active ones)",
                )
        else:
            row = next((r for r in await ledger.epochs(table) if r.id == epoch_id), None)
            if row is None:
                raise ReportError(f"table {table} has no epoch {epoch_id}")
        events = [ev for _, ev in await ledger.events(row.id)]
    finally:
        await ledger.close()
    return row, events


# -- drawing -----------------------------------------------------------------------------------

_COLOURS = {"matrix": "#4c72b0", "stored": "#55a868", "fresh": "#dd8452"}
_LABELS = {
    "matrix": "Matrix Mechanism release",
    "stored": "stored releases (no cost)",
    "fresh": "fresh noise (online)",
}


def _figure(tl: Timeline, title: str) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError(
            "lapras report needs matplotlib",
            hint="pip install -e '.[report]'",
        ) from None
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    ax_budget, ax_est, ax_se, ax_ov = fig.subplots(4, 1)
    st, cfg = tl.status, tl.config
    unit = st.unit
    fig.suptitle(title, fontsize=13)

    # 1. budget over the stream
    xs = [p.position for p in tl.budget]
    ax_budget.stackplot(
        xs,
        [p.matrix for p in tl.budget],
        [p.online for p in tl.budget],
        [p.pools for p in tl.budget],
        [p.reserve for p in tl.budget],
        labels=[
            "spent: Matrix Mechanism",
            "spent: online answers",
            "left: online pools",
            "left: reserve",
        ],
        colors=["#4c72b0", "#dd8452", "#f2d0b4", "#c7c7c7"],
        step="post",
    )
    ax_budget.axhline(st.total, color="black", lw=1, ls="--", label=f"budget ({st.total:.4g})")
    ax_budget.set_xlabel("stream position")
    ax_budget.set_ylabel(f"budget ({unit})")
    ax_budget.set_title(
        f"Budget: spent {st.spent:.4g} of {st.total:.4g} {unit} "
        f"({100 * st.spent / st.total:.1f}%), {st.online_releases} of {st.stream_length} online releases"
    )
    ax_budget.set_xlim(0, max(1, max(xs, default=0)))
    ax_budget.set_ylim(0, st.total * 1.25)  # room for the legend above the budget line
    ax_budget.legend(loc="upper left", fontsize=8, ncols=5)

    # 2. the estimator
    if tl.bad:
        bx = [q.position for q in tl.bad]
        if cfg.allocation_kind is not Allocation.STEADY:  # (the steady pacing uses no B_hat)
            ax_est.plot(
                bx, [q.b_hat for q in tl.bad], "o-", ms=3, color="#8172b2", label="B_hat(b)"
            )
        ax_est.step(
            bx, [q.b for q in tl.bad], where="post", color="#937860", label="b (bad so far)"
        )
        if tl.b_est is not None and tl.b_est_position is not None:
            ax_est.hlines(
                tl.b_est,
                tl.b_est_position,
                max(bx[-1], tl.b_est_position),
                color="#c44e52",
                lw=2,
                label=(
                    f"E = {tl.b_est:.0f} fresh answers expected (steady pacing)"
                    if cfg.allocation_kind is Allocation.STEADY
                    else f"B_est frozen at b = T = {cfg.t}: {tl.b_est:.1f}"
                ),
            )
        ax_est.set_yscale("log")
        ax_est.legend(loc="lower right", fontsize=8)
    else:
        ax_est.text(0.5, 0.5, "no unpredicted query yet", ha="center", va="center")
    ax_est.set_xlabel("stream position")
    ax_est.set_ylabel("bad queries (log)")
    ax_est.set_title(
        f"Estimator of the number of unpredicted queries (S = {cfg.stream_length}, T = {cfg.t}, "
        f"{cfg.allocation_kind.value} allocation)"
    )

    # 3. standard errors
    for source in ("matrix", "stored", "fresh"):
        pts = [(a.position, se) for a in tl.answers if a.source == source for se in a.std_errors]
        if pts:
            ax_se.scatter(
                [p for p, _ in pts],
                [se for _, se in pts],
                s=10,
                color=_COLOURS[source],
                label=f"{_LABELS[source]} ({sum(1 for a in tl.answers if a.source == source)})",
            )
    if tl.answers:
        ax_se.set_yscale("log")
        ax_se.legend(loc="upper left", fontsize=8)
    else:
        ax_se.text(0.5, 0.5, "no answer yet", ha="center", va="center")
    ax_se.set_xlabel("stream position")
    ax_se.set_ylabel("standard error (log)")
    ax_se.set_title("Standard error of each answer (one point per count or sum; repeats not shown)")

    # 4. overlap
    series = tl.overlap()
    realised = series[-1][1] if series else 0.0
    if series:
        ax_ov.step(
            [p for p, _ in series],
            [v for _, v in series],
            where="post",
            color=_COLOURS["matrix"],
            label=f"realised: {realised:.2f}",
        )
    if tl.predicted_overlap is not None:
        ax_ov.axhline(
            tl.predicted_overlap,
            color="black",
            ls="--",
            lw=1,
            label=f"predicted: {tl.predicted_overlap:.2f}",
        )
    if series or tl.predicted_overlap is not None:
        ax_ov.legend(loc="upper right", fontsize=8)
    ax_ov.set_ylim(0, 1.05)
    ax_ov.set_xlabel("stream position")
    ax_ov.set_ylabel("share answered from P")
    ax_ov.set_title("Overlap: the share of the answered statements that were predicted")
    return fig


def png_bytes(tl: Timeline, title: str) -> bytes:
    buf = io.BytesIO()
    _figure(tl, title).savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def title_of(row: EpochRow) -> str:
    return f"LAPRAS epoch {row.id} on {row.table_name} ({coverage(row.view_name)})"


def render_html(row: EpochRow, tl: Timeline, png: bytes) -> str:
    """A small self-contained page: the epoch's facts, the picture, the answered statements."""
    st, cfg = tl.status, tl.config
    e = html.escape
    facts: Sequence[tuple[str, str]] = (
        ("table", f"{row.table_name} ({coverage(row.view_name)})"),
        ("status", row.status + (f", closed {row.closed_at}" if row.closed_at else "")),
        (
            "started",
            f"{row.started_at} by {row.started_by}" + (f": {row.reason}" if row.reason else ""),
        ),
        ("budget", f"epsilon = {cfg.epsilon:g}, delta = {cfg.delta:g}"),
        (
            "configuration",
            f"mode {cfg.mode}, accountant {cfg.accountant_kind.value}, split {cfg.split}, "
            f"allocation {cfg.allocation_kind.value}, S = {cfg.stream_length}, T = {cfg.t}",
        ),
        ("spent", f"{st.spent:.6g} of {st.total:.6g} {st.unit} ({100 * st.spent / st.total:.1f}%)"),
        ("online releases", f"{st.online_releases} of {st.stream_length}"),
        ("stream position", str(st.position)),
        ("B_est", "not frozen yet" if st.b_est is None else f"{st.b_est:.1f}"),
        ("reserve left", f"{st.reserve:.6g} {st.unit}"),
    )
    rows = "\n".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in facts)
    answered = "\n".join(
        f"<tr><td>{a.position}</td><td>{e(_LABELS[a.source])}</td><td>{len(a.std_errors)}</td>"
        f"<td>{min(a.std_errors, default=0.0):.4g}</td><td>{max(a.std_errors, default=0.0):.4g}</td></tr>"
        for a in tl.answers
    )
    image = base64.b64encode(png).decode("ascii")
    title = title_of(row)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 1050px; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }}
th {{ background: #f4f4f4; }}
</style></head><body>
<h1>{e(title)}</h1>
<p>Drawn by <code>lapras report</code> from the epoch's ledger events: public values only
(charges, noise scales, standard errors, stream positions), no data.</p>
<table>
{rows}
</table>
<img src="data:image/png;base64,{image}" alt="{e(title)}" width="{int(FIGSIZE[0] * DPI)}">
<h2>Answered statements</h2>
<p>Stream position, how it was answered, number of values, smallest and largest standard
error. Exact repeats are not listed (they return a stored answer and leave no event).</p>
<table>
<tr><th>position</th><th>answered from</th><th>values</th><th>min s.e.</th><th>max s.e.</th></tr>
{answered}
</table>
</body></html>
"""


def write_report(
    row: EpochRow,
    events: Sequence[object],
    out: Path,
    html_out: Path | None,
    *,
    predicted_overlap: float | None = None,
) -> Timeline:
    """Write the PNG to ``out`` (and the HTML page to ``html_out``); return the timeline.
    ``predicted_overlap``: what the epoch's prediction expected, drawn against the realised."""
    tl = replace(timeline(events), predicted_overlap=predicted_overlap)
    png = png_bytes(tl, title_of(row))
    Path(out).write_bytes(png)
    if html_out is not None:
        Path(html_out).write_text(render_html(row, tl, png), encoding="utf-8")
    return tl
