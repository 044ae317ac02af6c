"""The rows of declared public tables, read once per epoch and stored with it.

A statement may join a protected table to a table the configuration declares public
(``[public_tables.NAME]``, :mod:`rewriter.public_tables`, :mod:`rewriter.lookups`). Its rows are
public data: the operator vouches that they are not derived from protected rows, and they are
read **as the passthrough role**, which PostgreSQL itself keeps from reading any protected table
or any relation derived from one (``lapras provision`` grants it SELECT only on the others): the
proxy never reads, through a public table, anything an analyst could not read directly.

Once per epoch: the first statement of an epoch that joins a public table reads it (every
declared column, as text, at most ``max_rows`` rows) and stores the rows with the epoch
(:meth:`proxy.ledger.Ledger.keep_public_rows`: the first stored content wins, so two processes
reading at once agree); every later statement of the epoch, in any process and after a
restart, joins that stored content. A change to the table shows in the next epoch. Nothing
about protected rows enters the read, and which rows are read depends only on the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from dp.errors import LaprasError
from rewriter import pgeval
from rewriter.public_tables import PublicTableDecl

Rows = tuple[tuple[object, ...], ...]


class PublicTableError(LaprasError):
    """55000 object_not_in_prerequisite_state: a declared public table cannot be read."""

    sqlstate = "55000"


async def read(dsn: str, decl: PublicTableDecl) -> list[list[str | None]]:
    """The rows of ``decl`` as PostgreSQL's text of each declared column (NULL: None), read
    as the role of ``dsn``; more than ``max_rows`` rows is an error."""
    cols = sql.SQL(", ").join(
        sql.SQL("{}::text").format(sql.Identifier(c)) for c, _ in decl.columns
    )
    query = sql.SQL("SELECT {} FROM {} LIMIT {}").format(
        cols, sql.Identifier(decl.schema, decl.name), sql.Literal(decl.max_rows + 1)
    )
    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("SET DateStyle = ISO")
            cur = await conn.execute(query)
            rows = await cur.fetchall()
    except psycopg.Error as e:
        raise PublicTableError(
            f"public table {decl.qualified} could not be read: {e.sqlstate or 'error'}",
            hint="check that it exists with the declared columns, and that the passthrough role "
            "may SELECT it (lapras provision grants it on the tables of schema public)",
        ) from None
    if len(rows) > decl.max_rows:
        raise PublicTableError(
            f"public table {decl.qualified} has more than {decl.max_rows:,} rows",
            hint=f"raise public_tables.{decl.name}.max_rows in lapras.toml",
        )
    return [[None if v is None else str(v) for v in r] for r in rows]


def typed(decl: PublicTableDecl, rows: Sequence[Sequence[str | None]]) -> Rows:
    """Stored rows (text) as values of the declared types (rewriter.pgeval's)."""
    out = []
    for r in rows:
        if len(r) != len(decl.columns):
            raise PublicTableError(
                f"the stored rows of public table {decl.qualified} do not match its columns"
            )
        try:
            out.append(
                tuple(
                    None if v is None else pgeval.cast(v, "unknown", t)
                    for v, (_, t) in zip(r, decl.columns, strict=True)
                )
            )
        except (pgeval.EvalError, pgeval.TypeMismatch, ValueError, ArithmeticError):
            raise PublicTableError(
                f"a value of public table {decl.qualified} is not of its declared type",
                hint=f"check public_tables.{decl.name}.columns in lapras.toml",
            ) from None
    return tuple(out)


async def rows_of(
    ledger: Any,
    epoch_id: int,
    cache: dict[str, Rows],
    decls: Sequence[PublicTableDecl],
    dsn: str,
) -> dict[str, Rows]:
    """The rows of each of ``decls`` in epoch ``epoch_id``, by qualified name: from ``cache``
    (the epoch's, in this process), else as stored with the epoch, else read now (as the role
    of ``dsn``) and stored (the first stored content wins)."""
    out: dict[str, Rows] = {}
    for decl in decls:
        name = decl.qualified
        hit = cache.get(name)
        if hit is None:
            stored = await ledger.public_rows(epoch_id, name)
            if stored is None:
                stored = await ledger.keep_public_rows(epoch_id, name, await read(dsn, decl))
            hit = typed(decl, stored)
            cache[name] = hit
        out[name] = hit
    return out


__all__ = ["PublicTableError", "Rows", "read", "rows_of", "typed"]
