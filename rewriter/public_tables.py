"""Unprotected, public tables a protected table may be joined to (``[public_tables.NAME]``).

A public table is a relation of the database that the operator declares **public**: its
content is a fact about the world (regions of countries, labels of codes, weights, thresholds),
not derived from protected rows. Statements may join a protected table to it on declared
attributes (``rewriter.lookups``); its rows are read once per epoch, at first use, through the
passthrough role (which PostgreSQL keeps from reading protected data), and stored with the
epoch, so that every proxy process answers from the same content (docs/configuration.md,
docs/privacy.md).

>>> from rewriter.schema import parse_schema
>>> s = parse_schema('''
... [tables.t.columns]
... a = "text"
... [tables.t.attributes.a]
... kind = "categorical"
... values = ["x", "y"]
... [public_tables.labels]
... columns = { code = "text", label = "text" }
... ''', "example.toml")
>>> s.public["labels"].qualified, s.public["labels"].columns
('public.labels', (('code', 'text'), ('label', 'text')))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

#: The most rows a public table may have unless its declaration says otherwise: its rows are
#: held in memory and each statement joining it spans its rows times the marginal's cells.
DEFAULT_MAX_ROWS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicTableDecl:
    """A declared public table: its columns (name -> canonical type) and a bound on its rows."""

    name: str
    schema: str
    columns: tuple[tuple[str, str], ...]
    max_rows: int = DEFAULT_MAX_ROWS

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


def parse(source: str, raw: object, protected: Mapping[str, object]) -> dict[str, PublicTableDecl]:
    """The ``[public_tables]`` section: each table's ``schema`` (default ``public``), every
    column it is read by, with its type, and ``max_rows`` (default 10,000)."""
    from .schema import _check_keys, _ident, _type

    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: public_tables: must be a table")
    out: dict[str, PublicTableDecl] = {}
    for name, spec in raw.items():
        key = f"public_tables.{name}"
        _ident(source, key, name)
        if not isinstance(spec, dict):
            raise ConfigError(f"{source}: {key}: must be a table")
        _check_keys(source, key, spec, {"schema", "columns", "max_rows"})
        schema = _ident(source, f"{key}.schema", spec.get("schema", "public"))
        if name in protected:
            raise ConfigError(
                f"{source}: {key}: {name} is declared protected too; a table is either protected "
                "or public"
            )
        cols = spec.get("columns")
        if not isinstance(cols, dict) or not cols:
            raise ConfigError(
                f"{source}: {key}.columns: must list the columns statements read, with their types"
            )
        columns = tuple(
            (_ident(source, f"{key}.columns.{c}", c), _type(source, f"{key}.columns.{c}", t))
            for c, t in cols.items()
        )
        rows: Any = spec.get("max_rows", DEFAULT_MAX_ROWS)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ConfigError(f"{source}: {key}.max_rows: must be an integer of at least 1")
        out[name] = PublicTableDecl(name=name, schema=schema, columns=columns, max_rows=rows)
    return out


__all__ = ["DEFAULT_MAX_ROWS", "PublicTableDecl", "parse"]
