"""SQL to linear queries over public histogram domains, pure (no I/O but reading the TOML).

The public API, all the proxy needs::

    schema = load_schema("lapras.toml")          # or parse_schema(text, source_name)
    for st in classify(sql, schema):             # one per statement; never raises
        match st:
            case Passthrough(sql=relay):         # relay to the upstream's passthrough role
            case ZeroRowProbe(columns=cols):     # RowDescription(cols) + "SELECT 0"
            case Refused(error=err):             # ErrorResponse(err.sqlstate, err.message, ...)
            case DPStatement(plan=None):         # has $n parameters: plan = bind(st, values)
            case DPStatement(plan=plan):         # answer plan.batch with the DP engine, then
                rows = postprocess(plan, noisy_answers)
            case Composed():                     # several releases: drive compose.steps(st),
                ...                              # answering each plan it yields, in order

    public_tables_of(st)                         # declared public tables it joins: bind(st, params,
                                                 #   public={name: rows}) with the epoch's rows
    pin_sql(schema, "adult")                     # the aggregator's one statement that pins the data
    pin_from_copy(domain, data)                  # its binary COPY output -> a dp.pin.Pin
    fingerprint(st, params)                      # template + bindings + key (query log)

``DPStatement.columns`` (name, type OID) and ``param_types`` are known before binding, for
Describe. A :class:`Plan` holds the table, the marginal it is over (``view``, named by its
attributes), its ``dp.domain.Domain``, one
``dp.domain.QueryBatch`` with every linear query, the output columns, the group keys per row
and the post-processing; no sqlglot node crosses into ``dp``. See docs/sql.md.

>>> from rewriter import classify, load_schema  # doctest: +SKIP
>>> [st] = classify("SELECT sex, count(*) FROM adult WHERE age BETWEEN 30 AND 39 GROUP BY 1",
...                 load_schema("sql_fixtures/adult/lapras.toml"))  # doctest: +SKIP
>>> st.plan.view, st.plan.batch.num_queries, st.plan.group_keys  # doctest: +SKIP
('(age, sex)', 2, (('Female',), ('Male',)))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import compose
from .answers import aggregate_errors, histogram_intervals, postprocess
from .clamp import clamped_since
from .clamp import note as clamp_note
from .classify import (
    DPStatement,
    Passthrough,
    Refused,
    Statement,
    ZeroRowProbe,
    bind,
    classify,
    single_part,
)
from .compose import Composed, Released, Result
from .errors import (
    BindError,
    ConfigError,
    DomainTooLargeError,
    InvalidValueError,
    RowAccessError,
    SqlSyntaxError,
    UndefinedColumnError,
    UndefinedTableError,
    UnsupportedError,
)
from .guard import may_name_protected
from .histogram import pin_domain, pin_from_copy, pin_from_rows, pin_sql
from .lookups import pending
from .plan import (
    Fingerprint,
    Measure,
    MeasureKind,
    OutputColumn,
    Plan,
    PostProcess,
)
from .reduce import _fingerprint
from .schema import Schema, load_schema, parse_schema


def public_tables_of(statement: DPStatement) -> tuple[str, ...]:
    """The declared public tables (qualified names) whose rows :func:`bind` needs for this
    statement (``bind(statement, params, public={name: rows})``); empty for most."""
    return pending(statement.prepared)


def fingerprint(statement: DPStatement, params: Sequence[object] = ()) -> Fingerprint:
    """The template fingerprint of a DP statement (parameters, if given, become bindings).

    The template replaces the literals of WHERE and HAVING with ``$n`` and is stable across
    spacing, case, quoting, table and output aliases and ``GROUP BY 1``.
    """
    return _fingerprint(statement.prepared, params)


def steps(
    statement: Composed,
    schema: Schema,
    params: Sequence[object] = (),
    param_oids: Sequence[int] = (),
) -> compose.Steps:
    """The releases of a composed statement, in order, then its result (see
    :func:`rewriter.compose.steps`: send each yielded plan's answers back); ``params``: the
    values of its ``$n`` (of the types ``param_oids``)."""
    return compose.steps(statement, schema, single_part, params, param_oids)


def run_composed(statement: Composed, schema: Schema, answer: Callable[[Plan], Released]) -> Result:
    """A composed statement's result, each release answered by ``answer`` (synchronous)."""
    return compose.run(statement, schema, answer, single_part)


__all__ = [
    "BindError",
    "Composed",
    "ConfigError",
    "DPStatement",
    "DomainTooLargeError",
    "Fingerprint",
    "InvalidValueError",
    "Measure",
    "MeasureKind",
    "OutputColumn",
    "Passthrough",
    "Plan",
    "PostProcess",
    "Refused",
    "Released",
    "Result",
    "RowAccessError",
    "Schema",
    "SqlSyntaxError",
    "Statement",
    "UndefinedColumnError",
    "UndefinedTableError",
    "UnsupportedError",
    "ZeroRowProbe",
    "aggregate_errors",
    "bind",
    "clamp_note",
    "clamped_since",
    "classify",
    "fingerprint",
    "histogram_intervals",
    "load_schema",
    "may_name_protected",
    "parse_schema",
    "pin_domain",
    "pin_from_copy",
    "pin_from_rows",
    "pin_sql",
    "postprocess",
    "public_tables_of",
    "run_composed",
    "steps",
]
