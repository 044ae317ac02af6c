"""Split a query string into its statements, keeping each statement's original text.

PostgreSQL's simple Query message may carry several statements separated by ``;``
(asyncpg's pool reset sends four). Splitting uses sqlglot's PostgreSQL tokenizer, so a ``;``
inside a string, a dollar-quoted body or a comment does not split. Each piece keeps its
verbatim text (passthrough relays it unchanged) and its offset in the whole string (for
error positions).

>>> [(p.text, p.offset) for p in split_statements("SELECT 1; SHOW x;")]
[('SELECT 1', 0), ('SHOW x', 10)]
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.postgres import Postgres
from sqlglot.tokenizer_core import Token, TokenType

_Tokenizer = Postgres().tokenizer_class


@dataclass(frozen=True, slots=True, kw_only=True)
class Piece:
    """One statement: verbatim text, 0-based offset in the string, tokens (None if untokenizable)."""

    text: str
    offset: int
    tokens: tuple[Token, ...] | None


def tokenize(sql: str) -> list[Token] | None:
    """sqlglot tokens of ``sql``, or None when it cannot be tokenized.

    A tokenizer per call (a few microseconds): a tokenizer keeps the last text it read and
    its tokens until the next one, which for a big statement is a lot of memory held for
    nothing, and statements are classified in more than one thread (proxy.dp_router).
    """
    try:
        return list(_Tokenizer().tokenize(sql))
    except MemoryError:  # the caller's limit (proxy.dp_workers), not the statement's fault
        raise
    except Exception:  # sqlglot raises TokenError and, on odd input, other errors
        return None


def split_statements(sql: str) -> list[Piece]:
    """The non-empty statements of ``sql`` in order (an empty list for an empty query)."""
    return split_tokens(sql, tokenize(sql))


def split_tokens(sql: str, tokens: list[Token] | None) -> list[Piece]:
    """:func:`split_statements` of ``sql`` whose tokens (:func:`tokenize`) are at hand."""
    if tokens is None:
        text = sql.strip()
        return [Piece(text=text, offset=sql.find(text), tokens=None)] if text.strip(";") else []
    pieces: list[Piece] = []
    current: list[Token] = []
    for tok in [*tokens, None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            if current:
                start, end = current[0].start, current[-1].end + 1
                # Comments before the first token are kept out; a quoted end may be beyond the
                # token's own text (closing quote), so extend to the next separator.
                stop = tok.start if tok is not None else len(sql)
                text = sql[start:stop].rstrip()
                if not text.startswith(sql[start:end][:1]):
                    text = sql[start:end]
                pieces.append(Piece(text=text, offset=start, tokens=tuple(current)))
            current = []
        else:
            current.append(tok)
    return pieces
