"""The exact data of a protected table for the exactness tests: one pin per table.

``rewriter.pin_sql`` is the aggregator's one statement over every declared attribute; its rows
become a :class:`dp.pin.Pin`, and ``pin.marginal(plan.batch.domain)`` is the exact dense
histogram a plan's batch is answered on (noise off).
"""

from __future__ import annotations

from typing import Any

import psycopg

import rewriter
from dp.pin import Pin
from rewriter.schema import Schema


def pin_table(dsn: str, schema: Schema, table: str) -> Pin:
    """The pin of ``table`` read on the backend at ``dsn`` (as the aggregator role)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(rewriter.pin_sql(schema, table)).fetchall()
    return rewriter.pin_from_rows(rewriter.pin_domain(schema, table), rows)


def exact_answer(plan: rewriter.Plan, pin: Pin) -> list[tuple[Any, ...]]:
    """The plan's rows on the exact data: its batch answered on the pinned marginal."""
    return rewriter.postprocess(plan, plan.batch.answer(pin.marginal(plan.batch.domain)))
