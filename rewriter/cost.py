"""The rewriter's work, predicted from public sizes, and a limit a caller may put on it.

Reading a statement and reducing it to linear queries is pure Python over public values: the
statement's text and the declared domains, never the data. Its cost is therefore known from
public sizes *before* the expensive step runs, and the steps that can grow large say so
first with :func:`spend`:

- reading the text (tokens, parse tree): about :data:`TEXT_UNITS` per byte;
- evaluating a cell expression at every value of the columns it reads (``rewriter.reduce``:
  one Python evaluation per value of the product of their declared domains):
  :data:`VALUE_UNITS` plus one unit per node of the expression, per value;
- the marginal's cells (masks, the query matrix: vectorised): :data:`CELL_UNITS` per cell and
  measure;
- the groups of the answer: :data:`GROUP_UNITS` per group (the reduction's own loop and the
  engine's share), and :data:`ROW_UNITS` per group and output column (the result rows, made
  after the answer: :func:`row_units`). A statement is refused for its rows *before* it is
  answered, never after its charge.

A unit is about half a microsecond of one core of the machine the constants were measured on
(docs/benchmarks.md, "Big statements"): :data:`UNITS_PER_SECOND`. The estimates follow the
work within a factor of about two; they are a *prediction*, made so that a statement that
cannot finish within its limit is refused at once instead of after the limit's wait. The
caller still times the work itself (proxy.dp_workers): the prediction is the early, cheap
check, not the only one.

Without :func:`limited` around it nothing is limited (the rewriter used as a library, the
tests of its semantics). Within it, the units a piece of work spends accumulate, and the
step that would take the total above the limit raises :class:`WorkLimitError` (54000) before
it starts, naming what was too big and what to do instead. Every figure in the message is a
public size (of the statement or the declaration), never a value of the data; the outcome
depends only on the statement, the declaration and the limit.

A step is spent once per piece of work (``key``): the same expression evaluated again
(cached, or for a second use) does not count twice, and what a process happened to cache
before does not count less, so that whether a statement is refused does not depend on which
worker process reduced it, nor on what it reduced before.

>>> with limited(20 * UNITS_PER_SECOND, setting="[server] dp_statement_timeout"):
...     spend(5 * UNITS_PER_SECOND, "reading it", advice="send a shorter one")
...     try:
...         spend(30 * UNITS_PER_SECOND, "an expression spans 60,000,000 values",
...               advice="use fewer columns")
...     except WorkLimitError as e:
...         print(e.sqlstate, e.message)
54000 the statement needs about 35 s of work, more than one statement may take ([server] dp_statement_timeout = 20 s): an expression spans 60,000,000 values
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

from dp.errors import LaprasError

#: Units per second of one core (see the module doc).
UNITS_PER_SECOND = 2_000_000
#: Units per byte of SQL text: tokenizing, splitting and parsing it (sqlglot), in the worst
#: case measured (a long IN list: about 5 s per MiB, a deep ``1+1+...``: up to 15 s per MiB).
TEXT_UNITS = 10
#: Units per value of an evaluated expression, besides one per node of the expression.
VALUE_UNITS = 1
#: Units per cell of the marginal and measure (vectorised masks and query matrix).
CELL_UNITS = 1 / 8
#: Units per group of an answer (its key in the reduction, its queries in the engine).
GROUP_UNITS = 10
#: Units per result row and output column, and per row (post-processing: 13-80 us a row on
#: Adult, more with AVG and ORDER BY).
ROW_UNITS = 20


class WorkLimitError(LaprasError):
    """54000 program_limit_exceeded: the statement's predicted work is above the limit.

    ``escalate``: raised under a *first* limit below the caller's full one (a quick lane,
    proxy.dp_workers), so the caller may run the work again under the full limit."""

    sqlstate = "54000"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        detail: str | None = None,
        escalate: bool = False,
    ) -> None:
        super().__init__(message, hint=hint, detail=detail)
        self.escalate = escalate


@dataclass(slots=True, kw_only=True)
class _Budget:
    limit: float
    setting: str
    full: float  # the caller's full limit (above ``limit`` in a quick lane)
    used: float = 0.0
    spent: set[Hashable] = field(default_factory=set)


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "rewriter_cost_budget", default=None
)


@contextlib.contextmanager
def limited(units: float, *, setting: str, full: float | None = None) -> Iterator[None]:
    """Limit the work spent within the block to ``units``; ``setting`` names the limit in
    messages (``"[server] dp_statement_timeout"``). With ``full`` above ``units``, work
    between the two raises :class:`WorkLimitError` with ``escalate`` set (the caller runs it
    again under ``full``); above ``full`` it is refused as under ``full`` alone."""
    budget = _Budget(limit=units, setting=setting, full=max(units, full or units))
    token = _BUDGET.set(budget)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def spend(units: float, what: str, *, advice: str, key: Hashable | None = None) -> None:
    """Count ``units`` of work about to be done for ``what`` (a public description: "the
    expression over columns a, b spans 4,923,072 values"); raise :class:`WorkLimitError`
    first when the total would pass the limit. ``advice``: what the sender may do instead.
    ``key``: a step spent before under the same key within this limit is not counted again."""
    budget = _BUDGET.get()
    if budget is None:
        return
    if key is not None:
        if key in budget.spent:
            return
        budget.spent.add(key)
    budget.used += units
    if budget.used <= budget.limit:
        return
    if budget.used <= budget.full:
        raise WorkLimitError(f"{what}: more work than the first limit takes", escalate=True)
    seconds, limit = budget.used / UNITS_PER_SECOND, budget.full / UNITS_PER_SECOND
    raise WorkLimitError(
        f"the statement needs about {seconds:,.0f} s of work, more than one statement may "
        f"take ({budget.setting} = {limit:g} s): {what}",
        hint=f"{advice}; or ask an administrator to raise {budget.setting}",
    )


def text_units(sql: str) -> float:
    """The predicted units of reading ``sql`` (by its length in characters)."""
    return TEXT_UNITS * len(sql)


def spend_text(sql: str) -> None:
    """:func:`spend` the reading of a statement's text."""
    spend(
        text_units(sql),
        f"reading a statement of {len(sql):,} characters",
        advice="send a shorter statement (a long IN list of consecutive values is a BETWEEN, "
        "a long list of conditions often a GROUP BY)",
    )


def spend_values(values: int, nodes: int, columns: str, key: Hashable) -> None:
    """:func:`spend` the evaluation of an expression of ``nodes`` nodes at ``values``
    values of ``columns``."""
    spend(
        values * (VALUE_UNITS + nodes),
        f"the expression over columns {columns} spans {values:,} values",
        advice="use fewer columns in one expression (or columns with fewer declared values)",
        key=key,
    )


def spend_cells(cells: int, measures: int, marginal: str) -> None:
    """:func:`spend` the vectorised work over a marginal of ``cells`` cells."""
    spend(
        cells * (1 + measures) * CELL_UNITS,
        f"the marginal {marginal} has {cells:,} cells",
        advice="use fewer columns in one statement",
    )


def row_units(groups: int, columns: int) -> float:
    """The predicted units of making ``groups`` result rows of ``columns`` columns."""
    return groups * ROW_UNITS * (1 + columns)


def spend_groups(groups: int, columns: int) -> None:
    """:func:`spend` the groups of an answer (at most ``groups``: a public bound) and its
    result rows of ``columns`` columns."""
    spend(
        groups * GROUP_UNITS + row_units(groups, columns),
        f"the statement has up to {groups:,} groups",
        advice="group by fewer columns (or columns with fewer declared values), or restrict "
        "the groups with WHERE",
    )


__all__ = [
    "UNITS_PER_SECOND",
    "WorkLimitError",
    "limited",
    "row_units",
    "spend",
    "spend_cells",
    "spend_groups",
    "spend_text",
    "spend_values",
    "text_units",
]
