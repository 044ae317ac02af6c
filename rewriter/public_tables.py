"""Unprotected, public tables a protected table may be joined to (``[public_tables.NAME]``,
parsed with the rest of the declaration by :mod:`rewriter.schema`).

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

from dataclasses import dataclass

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


__all__ = ["DEFAULT_MAX_ROWS", "PublicTableDecl"]
