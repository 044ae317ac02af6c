"""Errors raised by the rewriter, each with its PostgreSQL SQLSTATE.

All derive from :class:`dp.errors.LaprasError`. Messages never contain a data-dependent value:
they name the declared table or column and say what is accepted instead.
"""

from __future__ import annotations

from dp.errors import DomainTooLargeError, LaprasError

__all__ = [
    "ACCEPTED",
    "BindError",
    "ConfigError",
    "DomainTooLargeError",
    "InvalidValueError",
    "RowAccessError",
    "SqlSyntaxError",
    "UndefinedColumnError",
    "UndefinedTableError",
    "UnsupportedError",
]

#: What is answered over a protected table, for refusals' hints (docs/sql.md).
ACCEPTED = (
    "aggregates (count, sum, avg, min, max, stddev, variance, percentile_cont, "
    "percentile_disc, mode) of declared columns, with WHERE, GROUP BY, HAVING, window "
    "functions over the groups, and statements combining them, are answered; see docs/sql.md"
)


class ConfigError(LaprasError):
    """The TOML declaration of protected tables is invalid (names file, key and problem)."""

    sqlstate = "F0000"


class SqlSyntaxError(LaprasError):
    """The statement does not parse (position is 1-based, in characters, as in PostgreSQL)."""

    sqlstate = "42601"


class UnsupportedError(LaprasError):
    """The statement touches a protected table in a shape that is not answered."""

    sqlstate = "0A000"


class RowAccessError(LaprasError):
    """The statement would reveal rows (or exact statistics) of a protected table."""

    sqlstate = "42501"


class UndefinedTableError(LaprasError):
    """A table that is not declared (42P01)."""

    sqlstate = "42P01"


class UndefinedColumnError(LaprasError):
    """A column that the protected table does not declare (42703)."""

    sqlstate = "42703"


class InvalidValueError(LaprasError):
    """A literal or parameter value that cannot be read as the column's type (22P02)."""

    sqlstate = "22P02"


class BindError(LaprasError):
    """Wrong number of parameters for a prepared statement (08P01, as PostgreSQL)."""

    sqlstate = "08P01"


def units_hint(table: str, unit: str) -> str:
    """What is answered about the privacy unit ``unit`` of ``table`` (rewriter.units)."""
    return (
        f"count the units with count(DISTINCT {unit}), or ask how a per-unit value is "
        f"distributed: SELECT n, count(*) FROM (SELECT {unit}, count(*) AS n FROM {table} "
        f"GROUP BY {unit}) t GROUP BY n (docs/sql.md, questions about units)"
    )


def unit_column_error(table: str, unit: str) -> UnsupportedError:
    """The refusal of a use of the privacy unit column ``unit`` of ``table`` that no question
    about units takes (its values are never shown)."""
    return UnsupportedError(
        f"column {unit} is the privacy unit of protected table {table}: its values are "
        "never shown, and it is grouped on only inside a subquery",
        hint=units_hint(table, unit),
    )
