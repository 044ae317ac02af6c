"""PostgreSQL as the rewriter reads it: sqlglot's dialect, keeping what PostgreSQL wrote.

sqlglot translates some PostgreSQL calls into its own portable nodes, and loses what the
rewriter needs to evaluate them exactly as PostgreSQL does:

- ``to_char(d, 'Dy')`` becomes ``TimeToStr`` with a strftime format (``'%uy'``): PostgreSQL's
  template is gone; ``to_timestamp``/``to_date`` likewise;
- ``date_part('dow', d)`` becomes ``EXTRACT(DOW FROM d)``, whose result is ``numeric`` where
  ``date_part``'s is ``double precision`` (and whose column is named ``extract``);
- ``INTERVAL '@ 1 day ago'`` becomes ``INTERVAL '1' DAY`` (the sign is lost).

This dialect parses those calls as plain function calls, as PostgreSQL writes them, and keeps
the text of every ``INTERVAL`` literal (``meta["pg_text"]``: its string and the unit words
after it) for :func:`rewriter.pgtime.interval_literal`.

>>> import sqlglot
>>> e = sqlglot.parse_one("SELECT to_char(d, 'Dy'), INTERVAL '@ 1 day ago'", read=POSTGRES)
>>> [type(x).__name__ for x in e.expressions], e.expressions[1].meta["pg_text"]
(['Anonymous', 'Interval'], '@ 1 day ago')
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.helper import seq_get
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokenizer_core import TokenType

#: Calls kept as written (sqlglot would rewrite them into nodes that lose PostgreSQL's meaning:
#: ``log10(x)`` becomes ``log(10, x)``, numeric where log10 is double precision; ``div(a, b)`` a
#: cast of an integer division; ``pow``, ``power`` and ``strpos`` lose the name their column
#: takes).
_KEPT = (
    "TO_CHAR", "TO_DATE", "TO_TIMESTAMP", "MAKE_TIMESTAMP", "LOG10", "DIV", "POW", "POWER",
    "STRPOS",
)  # fmt: skip


#: PostgreSQL 16's built-in aggregates that sqlglot parses as plain calls (``jsonb_agg``,
#: ``xmlagg``, ``range_agg``...): parsed as sqlglot's anonymous aggregate instead, an aggregate
#: to every check that looks for one (as a plain call, ``SELECT jsonb_agg(x) FROM t`` was read
#: as a row-level SELECT), written back as the call it was.
_AGGREGATES = (
    "JSONB_AGG", "JSON_AGG_STRICT", "JSONB_AGG_STRICT", "JSON_OBJECT_AGG_STRICT",
    "JSONB_OBJECT_AGG_STRICT", "JSON_OBJECT_AGG_UNIQUE", "JSONB_OBJECT_AGG_UNIQUE",
    "JSON_OBJECT_AGG_UNIQUE_STRICT", "JSONB_OBJECT_AGG_UNIQUE_STRICT", "RANGE_AGG",
    "RANGE_INTERSECT_AGG", "XMLAGG",
)  # fmt: skip


def _aggregate(name: str) -> Any:
    return lambda args: exp.AnonymousAggFunc(this=name.lower(), expressions=args)


class LaprasPostgres(Postgres):
    """sqlglot's PostgreSQL dialect with PostgreSQL's time functions kept as calls."""

    #: A call's name as written (``var_samp``, ``substr``, ``ceiling``: sqlglot reads them as
    #: ``variance``, ``substring``, ``ceil``), for the column PostgreSQL names after it.
    ORIGINAL_NAME_META_KEY = "pg_name"

    class Parser(PostgresParser):
        FUNCTIONS: ClassVar = {
            **{k: v for k, v in PostgresParser.FUNCTIONS.items() if k not in _KEPT},
            # every() is PostgreSQL's other name for bool_and()
            "EVERY": lambda args: exp.LogicalAnd(this=seq_get(args, 0)),
            **{name: _aggregate(name) for name in _AGGREGATES},
        }
        FUNCTION_PARSERS: ClassVar = {
            k: v for k, v in PostgresParser.FUNCTION_PARSERS.items() if k != "DATE_PART"
        }

        def _parse_interval(self, *args: Any, **kwargs: Any) -> Any:
            start = self._index
            node = super()._parse_interval(*args, **kwargs)
            if isinstance(node, exp.Interval):
                toks = self._tokens[start : self._index]
                # INTERVAL 'text' [unit [TO unit]]: the string as written, then the words
                words = [t for t in toks[1:] if t.token_type is not TokenType.STRING]
                strings = [t for t in toks[1:] if t.token_type is TokenType.STRING]
                if toks and toks[0].token_type is TokenType.INTERVAL and len(strings) == 1:
                    node.meta["pg_text"] = strings[0].text
                    node.meta["pg_unit"] = " ".join(t.text.upper() for t in words)
            return node


POSTGRES = LaprasPostgres()
