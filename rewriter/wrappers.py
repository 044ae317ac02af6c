"""The wire-level wrappers tools put around a statement, and the commands that follow them.

Pure: a small lexer with PostgreSQL's rules (``--`` and nested ``/* */`` comments, quoted
identifiers with ``""`` and ``U&"..."``, ``'...'``, ``E'...'``, ``U&'...'`` and ``$tag$...$tag$``
strings, unquoted names folded to lower case and cut at 63 bytes), and parsers for

* the wrappers that carry a statement: ``EXPLAIN``, ``DECLARE name ... CURSOR ... FOR``,
  ``PREPARE name [(types)] AS`` and ``COPY (query) TO ...``. :func:`locate` finds where the
  carried statement is (the classifier classifies it on its own); :func:`describe` turns the
  wrapper of a DP statement into a frozen description (:class:`CopyTo`,
  :class:`DeclareCursor`, :class:`PrepareAs`), raising PostgreSQL's errors (SQLSTATEs included)
  for what PostgreSQL refuses;
* the commands that address what a wrapper made: ``FETCH``/``MOVE``, ``CLOSE``, ``EXECUTE``,
  ``DEALLOCATE`` (and the names of ``DECLARE``/``PREPARE``, whose names may be taken already).
  They name nothing protected; :func:`command` reads them so that the proxy can answer the
  ones addressing a cursor or statement a session holds itself (see proxy/wire/local.py).

>>> locate("DECLARE c CURSOR FOR SELECT count(*) FROM adult").kind
'declare'
>>> command('fetch 10 in "C"')
Fetch(name='C', direction='forward', count=10, move=False)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from dp.errors import LaprasError

from .errors import RowAccessError, SqlSyntaxError, UndefinedColumnError, UnsupportedError

__all__ = [
    "CloseCursor",
    "Command",
    "CopyTo",
    "Deallocate",
    "DeclareCursor",
    "ExecutePrepared",
    "Fetch",
    "Located",
    "NamesCursor",
    "NamesStatement",
    "PrepareAs",
    "Wrapper",
    "command",
    "describe",
    "locate",
]

#: PostgreSQL cuts identifiers at NAMEDATALEN - 1 bytes.
MAX_IDENTIFIER_BYTES = 63


# ---------------------------------------------------------------------------- errors


class InvalidParameterValue(LaprasError):
    """22023 invalid_parameter_value (a COPY option's value)."""

    sqlstate = "22023"


class InvalidCursorDefinition(LaprasError):
    """42P11 invalid_cursor_definition (``SCROLL`` and ``NO SCROLL`` together)."""

    sqlstate = "42P11"


class DuplicateColumn(LaprasError):
    """42701 duplicate_column (a column named twice in ``FORCE_QUOTE``)."""

    sqlstate = "42701"


# ---------------------------------------------------------------------------- descriptions


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyTo:
    """``COPY (statement) TO STDOUT`` with its options, as PostgreSQL resolves them (defaults
    filled in: text uses tab and ``\\N``, CSV comma, the empty string, ``"`` and ``"``)."""

    format: Literal["text", "csv", "binary"] = "text"
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'
    force_quote: tuple[bool, ...] = ()  # per result column (CSV): quote every non-NULL value


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclareCursor:
    """``DECLARE name [BINARY] [[NO] SCROLL] CURSOR [WITH | WITHOUT HOLD] FOR``. ``scroll``
    None: neither was written."""

    name: str
    binary: bool = False
    scroll: bool | None = None
    hold: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareAs:
    """``PREPARE name [(type, ...)] AS``; the types as written (PostgreSQL type syntax)."""

    name: str
    param_types: tuple[str, ...] = ()


Wrapper: TypeAlias = CopyTo | DeclareCursor | PrepareAs


@dataclass(frozen=True, slots=True)
class Fetch:
    """``FETCH``/``MOVE`` (``move``) as PostgreSQL's grammar turns it: a direction and a count
    (None: ALL). ``FIRST`` is ABSOLUTE 1, ``LAST`` ABSOLUTE -1, ``NEXT`` FORWARD 1, ``PRIOR``
    BACKWARD 1, a bare count FORWARD n."""

    name: str
    direction: Literal["forward", "backward", "absolute", "relative"]
    count: int | None
    move: bool


@dataclass(frozen=True, slots=True)
class CloseCursor:
    name: str | None  # None: CLOSE ALL


@dataclass(frozen=True, slots=True)
class ExecutePrepared:
    """``EXECUTE name [(args)]``: each argument in its text form (None: NULL); ``args`` None
    when one is not a constant."""

    name: str
    args: tuple[str | None, ...] | None


@dataclass(frozen=True, slots=True)
class Deallocate:
    name: str | None  # None: DEALLOCATE ALL


@dataclass(frozen=True, slots=True)
class NamesCursor:
    """A ``DECLARE`` (of any statement): the cursor name it takes."""

    name: str


@dataclass(frozen=True, slots=True)
class NamesStatement:
    """A ``PREPARE`` (of any statement): the statement name it takes."""

    name: str


Command: TypeAlias = (
    Fetch | CloseCursor | ExecutePrepared | Deallocate | NamesCursor | NamesStatement
)


# ---------------------------------------------------------------------------- lexer


@dataclass(frozen=True, slots=True)
class Token:
    """``kind``: word (unquoted name or keyword, folded), name (quoted identifier), string,
    number, param ($n), op (punctuation and operators)."""

    kind: Literal["word", "name", "string", "number", "param", "op"]
    value: str
    start: int
    end: int


class _LexError(Exception):
    pass


_SPACE = " \t\n\r\f\v"
_OP_CHARS = "+-*/<>=~!@#%^&|`?"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ident_start(c: str) -> bool:
    return not c.isascii() or c.isalpha() or c == "_"


def _ident_char(c: str) -> bool:
    return not c.isascii() or c.isalnum() or c in "_$"


def truncate(name: str) -> str:
    """``name`` cut to PostgreSQL's 63 bytes (at a character boundary)."""
    if len(name) <= MAX_IDENTIFIER_BYTES // 4 or len(name.encode()) <= MAX_IDENTIFIER_BYTES:
        return name
    out = name.encode()[:MAX_IDENTIFIER_BYTES]
    return out.decode("utf-8", errors="ignore")


def _skip_space(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c in _SPACE:
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while depth:
                a, b = text.find("/*", i), text.find("*/", i)
                if b < 0:
                    raise _LexError("unterminated /* comment")
                if 0 <= a < b:
                    depth, i = depth + 1, a + 2
                else:
                    depth, i = depth - 1, b + 2
        else:
            break
    return i


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """The body of a quoted token opening at ``i`` (doubled quotes kept single), and the
    index after its closing quote."""
    parts: list[str] = []
    j = i + 1
    while True:
        k = text.find(quote, j)
        if k < 0:
            raise _LexError("unterminated quoted token")
        parts.append(text[j:k])
        if text.startswith(quote * 2, k):
            parts.append(quote)
            j = k + 2
            continue
        return "".join(parts), k + 1


_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _escape_string(text: str, i: int) -> tuple[str, int]:
    """An E'...' string from its opening quote at ``i``."""
    out: list[str] = []
    j, n = i + 1, len(text)
    while j < n:
        c = text[j]
        if c == "'":
            if text.startswith("''", j):
                out.append("'")
                j += 2
                continue
            return "".join(out), j + 1
        if c == "\\" and j + 1 < n:
            d = text[j + 1]
            if d in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[d])
                j += 2
            elif d in "01234567":
                k = j + 1
                while k < min(j + 4, n) and text[k] in "01234567":
                    k += 1
                out.append(chr(int(text[j + 1 : k], 8)))
                j = k
            elif d == "x" and j + 2 < n and text[j + 2] in "0123456789abcdefABCDEF":
                k = j + 2
                while k < min(j + 4, n) and text[k] in "0123456789abcdefABCDEF":
                    k += 1
                out.append(chr(int(text[j + 2 : k], 16)))
                j = k
            elif d in "uU":
                width = 4 if d == "u" else 8
                digits = text[j + 2 : j + 2 + width]
                if len(digits) != width or not all(x in "0123456789abcdefABCDEF" for x in digits):
                    raise _LexError("invalid Unicode escape")
                out.append(chr(int(digits, 16)))
                j += 2 + width
            else:
                out.append(d)
                j += 2
            continue
        out.append(c)
        j += 1
    raise _LexError("unterminated quoted string")


def _unicode_escapes(body: str) -> str:
    """The body of a U&'...' or U&"..." token with its \\XXXX and \\+XXXXXX escapes."""
    out: list[str] = []
    j, n = 0, len(body)
    while j < n:
        c = body[j]
        if c != "\\":
            out.append(c)
            j += 1
        elif body.startswith("\\\\", j):
            out.append("\\")
            j += 2
        else:
            width, k = (6, j + 2) if body.startswith("\\+", j) else (4, j + 1)
            digits = body[k : k + width]
            if len(digits) != width or not all(x in "0123456789abcdefABCDEF" for x in digits):
                raise _LexError("invalid Unicode escape")
            out.append(chr(int(digits, 16)))
            j = k + width
    return "".join(out)


def _tokens(text: str, start: int = 0) -> Iterator[Token]:
    """The tokens of ``text`` from ``start``, lazily (raises _LexError on a broken token)."""
    i, n = start, len(text)
    while True:
        i = _skip_space(text, i)
        if i >= n:
            return
        c = text[i]
        if c == '"':
            body, j = _quoted(text, i, '"')
            if not body:
                raise _LexError("zero-length delimited identifier")
            yield Token("name", truncate(body), i, j)
        elif c == "'":
            body, j = _quoted(text, i, "'")
            body, j = _continued(text, body, j, escape=False)
            yield Token("string", body, i, j)
        elif c in "eE" and text.startswith("'", i + 1):
            body, j = _escape_string(text, i + 1)
            body, j = _continued(text, body, j, escape=True)
            yield Token("string", body, i, j)
        elif c in "uU" and text.startswith("&'", i + 1):
            body, j = _quoted(text, i + 2, "'")
            yield Token("string", _unicode_escapes(body), i, j)
        elif c in "uU" and text.startswith('&"', i + 1):
            body, j = _quoted(text, i + 2, '"')
            yield Token("name", truncate(_unicode_escapes(body)), i, j)
        elif c in "nN" and text.startswith("'", i + 1):
            body, j = _quoted(text, i + 1, "'")
            yield Token("string", body, i, j)
        elif c == "$" and i + 1 < n and text[i + 1].isdigit():
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            yield Token("param", text[i + 1 : j], i, j)
        elif c == "$":
            j = text.find("$", i + 1)
            tag = text[i : j + 1] if j > 0 else ""
            if not tag or not all(_ident_char(x) and x != "$" for x in tag[1:-1]):
                raise _LexError("unexpected $")
            k = text.find(tag, j + 1)
            if k < 0:
                raise _LexError("unterminated dollar-quoted string")
            yield Token("string", text[j + 1 : k], i, k + len(tag))
            j = k + len(tag)
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i
            while j < n and (text[j].isdigit() or text[j] == "_"):
                j += 1
            if j < n and text[j] == "." and not text.startswith("..", j):
                j += 1
                while j < n and text[j].isdigit():
                    j += 1
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k].isdigit():
                    j = k
                    while j < n and text[j].isdigit():
                        j += 1
            yield Token("number", text[i:j], i, j)
        elif _ident_start(c):
            j = i + 1
            while j < n and _ident_char(text[j]):
                j += 1
            yield Token("word", truncate(text[i:j].translate(_ASCII_LOWER)), i, j)
        elif text.startswith("::", i):
            j = i + 2
            yield Token("op", "::", i, j)
        elif c in "()[],;:.*":
            j = i + 1
            yield Token("op", c, i, j)
        elif c in _OP_CHARS:
            j = i + 1
            while j < n and text[j] in _OP_CHARS and not text.startswith(("--", "/*"), j):
                j += 1
            yield Token("op", text[i:j], i, j)
        else:
            raise _LexError(f"unexpected character {c!r}")
        i = j


def _continued(text: str, body: str, j: int, *, escape: bool) -> tuple[str, int]:
    """PostgreSQL joins string literals separated by white space holding a newline."""
    while True:
        k = j
        while k < len(text) and text[k] in _SPACE:
            k += 1
        if k >= len(text) or text[k] != "'" or "\n" not in text[j:k]:
            return body, j
        more, j = _escape_string(text, k) if escape else _quoted(text, k, "'")
        body += more


def _all_tokens(text: str, start: int = 0) -> list[Token] | None:
    try:
        return list(_tokens(text, start))
    except _LexError:
        return None


class _Stream:
    """Tokens with one look-ahead, a piece of grammar at a time."""

    def __init__(self, tokens: Iterator[Token]) -> None:
        self._it = tokens
        self._next: Token | None = None
        self._done = False

    def peek(self) -> Token | None:
        if self._next is None and not self._done:
            try:
                self._next = next(self._it)
            except StopIteration:
                self._done = True
        return self._next

    def take(self) -> Token | None:
        t = self.peek()
        self._next = None
        return t

    def word(self, *values: str) -> bool:
        """Take the next token if it is one of the keywords ``values``."""
        t = self.peek()
        if t is not None and t.kind == "word" and t.value in values:
            self.take()
            return True
        return False

    def op(self, value: str) -> bool:
        t = self.peek()
        if t is not None and t.kind == "op" and t.value == value:
            self.take()
            return True
        return False

    def name(self) -> Token | None:
        """A name (ColId: a word or a quoted identifier), taken; None if the next is not."""
        t = self.peek()
        if t is not None and t.kind in ("word", "name"):
            return self.take()
        return None


# ---------------------------------------------------------------------------- wrappers


@dataclass(frozen=True, slots=True)
class Located:
    """A wrapper found by :func:`locate`: its kind and where the carried statement is
    (``text[start:end]``, from its first token to its last). ``head`` and ``tail`` are the
    wrapper's own tokens before and after it."""

    kind: Literal["explain", "declare", "prepare", "copy"]
    start: int
    end: int
    head: tuple[Token, ...]
    tail: tuple[Token, ...] = ()


_CURSOR_OPTIONS = ("binary", "asensitive", "insensitive", "scroll", "no")


def locate(text: str) -> Located | None:
    """The wrapper ``text`` starts with, or None (not a wrapper, or not one that parses)."""
    try:
        return _locate(text)
    except _LexError:
        return None


def _locate(text: str) -> Located | None:
    head: list[Token] = []
    it = _tokens(text)

    def nxt() -> Token | None:
        t = next(it, None)
        if t is not None:
            head.append(t)
        return t

    first = nxt()
    if first is None or first.kind != "word":
        return None
    verb = first.value
    if verb == "explain":
        t = nxt()
        if t is not None and t.kind == "op" and t.value == "(":
            if not _skip_parens(nxt):
                return None
            t = nxt()
        while t is not None and t.kind == "word" and t.value in ("analyze", "analyse", "verbose"):
            t = nxt()
        return _carried("explain", text, t, head)
    if verb == "declare":
        if (t := nxt()) is None or t.kind not in ("word", "name"):
            return None
        t = nxt()
        while t is not None and t.kind == "word" and t.value in _CURSOR_OPTIONS:
            if t.value == "no" and not ((t := nxt()) and t.kind == "word" and t.value == "scroll"):
                return None
            t = nxt()
        if t is None or t.kind != "word" or t.value != "cursor":
            return None
        t = nxt()
        if t is not None and t.kind == "word" and t.value in ("with", "without"):
            if not ((t := nxt()) and t.kind == "word" and t.value == "hold"):
                return None
            t = nxt()
        if t is None or t.kind != "word" or t.value != "for":
            return None
        return _carried("declare", text, nxt(), head)
    if verb == "prepare":
        if (t := nxt()) is None or t.kind not in ("word", "name"):
            return None
        t = nxt()
        if t is not None and t.kind == "op" and t.value == "(":
            if not _skip_parens(nxt):
                return None
            t = nxt()
        if t is None or t.kind != "word" or t.value != "as":
            return None
        return _carried("prepare", text, nxt(), head)
    if verb == "copy":
        t = nxt()
        if t is None or t.kind != "op" or t.value != "(":
            return None  # COPY of a table: not a wrapper
        rest = list(it)  # the carried statement and the tail
        depth = 1
        for k, tok in enumerate(rest):
            if tok.kind == "op" and tok.value in "()":
                depth += 1 if tok.value == "(" else -1
                if depth == 0:
                    if k == 0:
                        return None
                    return Located(
                        "copy",
                        rest[0].start,
                        rest[k - 1].end,
                        (*head, tok),
                        tuple(rest[k + 1 :]),
                    )
        return None
    return None


def _skip_parens(nxt: object) -> bool:
    """Take tokens up to the ``)`` closing the ``(`` just taken; False at the end."""
    depth = 1
    assert callable(nxt)
    while depth:
        t = nxt()
        if t is None:
            return False
        assert isinstance(t, Token)
        if t.kind == "op" and t.value == "(":
            depth += 1
        elif t.kind == "op" and t.value == ")":
            depth -= 1
    return True


def _carried(kind: str, text: str, first: Token | None, head: list[Token]) -> Located | None:
    if first is None:
        return None
    head.pop()  # the carried statement's first token
    end = len(text.rstrip())
    while end > first.start and text[end - 1] == ";":  # never in a split piece; be safe
        end = len(text[: end - 1].rstrip())
    return Located(kind, first.start, end, tuple(head))  # type: ignore[arg-type]


def describe(located: Located, text: str, columns: Sequence[str]) -> Wrapper:
    """The description of the wrapper around a DP statement whose result columns are named
    ``columns``, or PostgreSQL's error for it (COPY's options, a cursor's, a target other than
    STDOUT). ``text`` is the whole statement. EXPLAIN has none: it is refused by the caller."""
    if located.kind == "declare":
        return _declare(located)
    if located.kind == "prepare":
        return _prepare(located, text)
    if located.kind == "copy":
        return _copy(located, text, columns)
    raise ValueError(f"no description of {located.kind}")


def _declare(located: Located) -> DeclareCursor:
    toks = located.head
    name = toks[1].value
    binary = hold = False
    scroll: bool | None = None
    sensitivity: str | None = None
    i = 2
    while toks[i].value != "cursor" or toks[i].kind != "word":
        v = toks[i].value
        if v == "binary":
            binary = True
        elif v in ("asensitive", "insensitive"):
            if sensitivity is not None and sensitivity != v:
                raise InvalidCursorDefinition("cannot specify both ASENSITIVE and INSENSITIVE")
            sensitivity = v
        elif v == "no":
            i += 1
            if scroll is True:
                raise InvalidCursorDefinition("cannot specify both SCROLL and NO SCROLL")
            scroll = False
        elif v == "scroll":
            if scroll is False:
                raise InvalidCursorDefinition("cannot specify both SCROLL and NO SCROLL")
            scroll = True
        i += 1
    if toks[i + 1].value == "with":
        hold = True
    return DeclareCursor(name=name, binary=binary, scroll=scroll, hold=hold)


def _prepare(located: Located, text: str) -> PrepareAs:
    toks = located.head
    name = toks[1].value
    types: list[str] = []
    if toks[2].kind == "op" and toks[2].value == "(":
        depth, begin = 0, toks[3].start
        for t in toks[3:-1]:  # up to the closing parenthesis, before AS
            if t.kind == "op" and t.value in "()":
                depth += 1 if t.value == "(" else -1
            if depth < 0 or (depth == 0 and t.kind == "op" and t.value == ","):
                piece = text[begin : t.start].strip()
                if not piece:
                    raise SqlSyntaxError(
                        f'syntax error at or near "{t.value}"', position=t.start + 1
                    )
                types.append(piece)
                begin = t.end
                if depth < 0:
                    break
    return PrepareAs(name=name, param_types=tuple(types))


# -- COPY ------------------------------------------------------------------------------

_Arg: TypeAlias = tuple[str, object]  # (kind, value): none, text, number, star, list


def _copy(located: Located, text: str, columns: Sequence[str]) -> CopyTo:
    s = _Stream(iter(located.tail))
    where = located.head[0].start

    def syntax(t: Token | None) -> SqlSyntaxError:
        if t is None:
            return SqlSyntaxError("syntax error at end of input", position=len(text) + 1)
        return SqlSyntaxError(
            f'syntax error at or near "{text[t.start : t.end]}"', position=t.start + 1
        )

    if not s.word("to"):
        raise syntax(s.peek())
    program = s.word("program")
    target = s.take()
    if target is None or not (
        target.kind == "string"
        or (not program and target.kind == "word" and target.value in ("stdout", "stdin"))
    ):
        raise syntax(target)
    options = _copy_options(s, syntax)
    if target.kind == "string":
        raise RowAccessError(
            "COPY of an aggregate over a protected table "
            + ("to a program" if program else "to a file")
            + " is refused",
            hint="use COPY (...) TO STDOUT (psql: \\copy) to receive the answer",
            position=where + 1,
        )
    return _copy_to(options, columns)


def _copy_options(s: _Stream, syntax: object) -> list[tuple[str, _Arg, Token]]:
    """The options after the target, new or old style, as (name, argument, token)."""
    assert callable(syntax)
    s.word("with")
    out: list[tuple[str, _Arg, Token]] = []
    if s.op("("):
        while True:
            t = s.take()
            if t is None or t.kind not in ("word", "name"):
                raise syntax(t)
            out.append((t.value, _generic_arg(s, syntax), t))
            if s.op(")"):
                break
            if not s.op(","):
                raise syntax(s.peek())
        if s.peek() is not None:
            raise syntax(s.peek())
        return out
    while (t := s.take()) is not None:
        if t.kind != "word":
            raise syntax(t)
        v = t.value
        if v in ("binary", "csv"):
            out.append(("format", ("text", v), t))
        elif v == "freeze":
            out.append(("freeze", ("none", None), t))
        elif v == "header":
            out.append(("header", ("none", None), t))
        elif v in ("delimiter", "null", "quote", "escape"):
            s.word("as")
            a = s.take()
            if a is None or a.kind != "string":
                raise syntax(a)
            out.append((v, ("text", a.value), t))
        elif v == "encoding":
            a = s.take()
            if a is None or a.kind != "string":
                raise syntax(a)
            out.append(("encoding", ("text", a.value), t))
        elif v == "force":
            if s.word("quote"):
                name = "force_quote"
            elif s.word("not"):
                if not s.word("null"):
                    raise syntax(s.peek())
                name = "force_not_null"
            elif s.word("null"):
                name = "force_null"
            else:
                raise syntax(s.peek())
            if name == "force_quote" and s.op("*"):
                out.append((name, ("star", None), t))
                continue
            cols = [_column(s, syntax)]
            while s.op(","):
                cols.append(_column(s, syntax))
            out.append((name, ("list", tuple(cols)), t))
        else:
            raise syntax(t)
    return out


def _column(s: _Stream, syntax: object) -> str:
    assert callable(syntax)
    t = s.name()
    if t is None:
        raise syntax(s.peek())
    return t.value


def _generic_arg(s: _Stream, syntax: object) -> _Arg:
    assert callable(syntax)
    t = s.peek()
    if t is None or (t.kind == "op" and t.value in (",", ")")):
        return ("none", None)
    if t.kind in ("word", "string", "name"):
        s.take()
        return ("text", t.value)
    if t.kind == "number":
        s.take()
        return ("number", t.value)
    if t.kind == "op" and t.value in ("+", "-"):
        s.take()
        n = s.take()
        if n is None or n.kind != "number":
            raise syntax(n)
        return ("number", t.value.replace("+", "") + n.value)
    if t.kind == "op" and t.value == "*":
        s.take()
        return ("star", None)
    if t.kind == "op" and t.value == "(":
        s.take()
        items: list[str] = []
        while True:
            a = s.take()
            if a is None or a.kind not in ("word", "string", "name"):
                raise syntax(a)
            items.append(a.value)
            if s.op(")"):
                return ("list", tuple(items))
            if not s.op(","):
                raise syntax(s.peek())
    raise syntax(t)


def _string_of(name: str, arg: _Arg) -> str:
    """defGetString: the option's value as text."""
    kind, value = arg
    if kind in ("text", "number"):
        return str(value)
    if kind == "none":
        raise SqlSyntaxError(f"{name} requires a parameter")
    if kind == "star":
        return "*"
    raise SqlSyntaxError(f"{name} requires a parameter")


def _boolean_of(name: str, arg: _Arg, *, match: bool = False) -> bool | None:
    """defGetBoolean / defGetCopyHeaderChoice; None for "match"."""
    kind, value = arg
    if kind == "none":
        return True
    if kind == "number" and value in ("0", "1"):
        return value == "1"
    if kind == "text":
        v = str(value).lower()
        if v in ("true", "on"):
            return True
        if v in ("false", "off"):
            return False
        if match and v == "match":
            return None
    if match:
        raise SqlSyntaxError(f'{name} requires a Boolean value or "match"')
    raise SqlSyntaxError(f"{name} requires a Boolean value")


# PostgreSQL's encoding names and their aliases (pg_encname_tbl), cleaned as
# clean_encoding_name cleans them (letters and digits, lower case). The proxy encodes
# answers in UTF-8; COPY accepts the encodings that are UTF-8 on the wire.
_UTF8_NAMES = frozenset({"utf8", "unicode", "sqlascii"})
_ENCODING_NAMES = _UTF8_NAMES | frozenset(
    (
        "abc",
        "alt",
        "big5",
        "cp1250",
        "cp1251",
        "cp1252",
        "cp1253",
        "cp1254",
        "cp1255",
        "cp1256",
        "cp1257",
        "cp1258",
        "cp866",
        "cp932",
        "cp936",
        "cp949",
        "cp950",
        "euccn",
        "eucjis2004",
        "eucjp",
        "euckr",
        "euctw",
        "gb18030",
        "gbk",
        "iso88591",
        "iso885910",
        "iso885913",
        "iso885914",
        "iso885915",
        "iso885916",
        "iso88592",
        "iso88593",
        "iso88594",
        "iso88595",
        "iso88596",
        "iso88597",
        "iso88598",
        "iso88599",
        "johab",
        "koi8",
        "koi8r",
        "koi8u",
        "latin1",
        "latin10",
        "latin2",
        "latin3",
        "latin4",
        "latin5",
        "latin6",
        "latin7",
        "latin8",
        "latin9",
        "mskanji",
        "muleinternal",
        "shiftjis",
        "shiftjis2004",
        "sjis",
        "tcvn",
        "tcvn5712",
        "uhc",
        "vscii",
        "win",
        "win1250",
        "win1251",
        "win1252",
        "win1253",
        "win1254",
        "win1255",
        "win1256",
        "win1257",
        "win1258",
        "win866",
        "win874",
        "win932",
        "win936",
        "win949",
        "win950",
        "windows1250",
        "windows1251",
        "windows1252",
        "windows1253",
        "windows1254",
        "windows1255",
        "windows1256",
        "windows1257",
        "windows1258",
        "windows866",
        "windows874",
        "windows932",
        "windows936",
        "windows949",
        "windows950",
    )
)


def _copy_to(options: list[tuple[str, _Arg, Token]], columns: Sequence[str]) -> CopyTo:
    """ProcessCopyOptions (copy.c) for COPY TO, in its order, then the FORCE_QUOTE columns
    as BeginCopyTo resolves them."""
    fmt: str | None = None
    seen: set[str] = set()
    header: bool | None = None
    delim = null = quote = escape = None
    force_quote: tuple[str, ...] | None = None
    force_all = False
    lists: dict[str, object] = {}
    default = False

    def once(name: str) -> None:
        if name in seen:
            raise SqlSyntaxError("conflicting or redundant options")
        seen.add(name)

    for name, arg, _ in options:
        if name == "format":
            once(name)
            fmt = _string_of(name, arg)
            if fmt not in ("text", "csv", "binary"):
                raise InvalidParameterValue(f'COPY format "{fmt}" not recognized')
        elif name == "freeze":
            once(name)
            _boolean_of(name, arg)
        elif name in ("delimiter", "null", "quote", "escape"):
            once(name)
            value = _string_of(name, arg)
            if name == "delimiter":
                delim = value
            elif name == "null":
                null = value
            elif name == "quote":
                quote = value
            else:
                escape = value
        elif name == "default":
            once(name)
            _string_of(name, arg)
            default = True
        elif name == "header":
            once(name)
            h = _boolean_of(name, arg, match=True)
            if h is None:
                raise UnsupportedError('cannot use "match" with HEADER in COPY TO')
            header = h
        elif name in ("force_quote", "force_not_null", "force_null"):
            once(name)
            kind, items = arg
            if kind == "star" and name != "force_null":
                if name == "force_quote":
                    force_all = True
                lists[name] = "*"
            elif kind == "list":
                assert isinstance(items, tuple)
                if name == "force_quote":
                    force_quote = items
                lists[name] = items
            else:
                raise InvalidParameterValue(
                    f'argument to option "{name}" must be a list of column names'
                )
        elif name == "encoding":
            once(name)
            enc = "".join(c for c in _string_of(name, arg) if c.isalnum()).lower()
            if enc not in _ENCODING_NAMES:
                raise InvalidParameterValue(
                    'argument to option "encoding" must be a valid encoding name'
                )
            if enc not in _UTF8_NAMES:
                raise UnsupportedError(
                    "COPY of a differentially private answer is sent in UTF8 only",
                    hint="leave ENCODING out, or write ENCODING 'UTF8'",
                )
        else:
            raise SqlSyntaxError(f'option "{name}" not recognized')

    binary, csv = fmt == "binary", fmt == "csv"
    if binary and delim is not None:
        raise SqlSyntaxError("cannot specify DELIMITER in BINARY mode")
    if binary and null is not None:
        raise SqlSyntaxError("cannot specify NULL in BINARY mode")
    if binary and default:
        raise SqlSyntaxError("cannot specify DEFAULT in BINARY mode")
    if delim is None:
        delim = "," if csv else "\t"
    if null is None:
        null = "" if csv else "\\N"
    if csv:
        quote = '"' if quote is None else quote
        escape = quote if escape is None else escape
    if len(delim.encode()) != 1:
        raise UnsupportedError("COPY delimiter must be a single one-byte character")
    if delim in "\r\n":
        raise InvalidParameterValue("COPY delimiter cannot be newline or carriage return")
    if "\r" in null or "\n" in null:
        raise InvalidParameterValue(
            "COPY null representation cannot use newline or carriage return"
        )
    if default:
        raise UnsupportedError("COPY DEFAULT only available using COPY FROM")
    if not csv and delim in "\\.abcdefghijklmnopqrstuvwxyz0123456789":
        raise InvalidParameterValue(f'COPY delimiter cannot be "{delim}"')
    if binary and header:
        raise UnsupportedError("cannot specify HEADER in BINARY mode")
    if not csv and quote is not None:
        raise UnsupportedError("COPY quote available only in CSV mode")
    if csv and len((quote or "").encode()) != 1:
        raise UnsupportedError("COPY quote must be a single one-byte character")
    if csv and delim == quote:
        raise InvalidParameterValue("COPY delimiter and quote must be different")
    if not csv and escape is not None:
        raise UnsupportedError("COPY escape available only in CSV mode")
    if csv and len((escape or "").encode()) != 1:
        raise UnsupportedError("COPY escape must be a single one-byte character")
    if not csv and "force_quote" in lists:
        raise UnsupportedError("COPY force quote available only in CSV mode")
    if not csv and "force_not_null" in lists:
        raise UnsupportedError("COPY force not null available only in CSV mode")
    if "force_not_null" in lists:
        raise UnsupportedError("COPY force not null only available using COPY FROM")
    if not csv and "force_null" in lists:
        raise UnsupportedError("COPY force null available only in CSV mode")
    if "force_null" in lists:
        raise UnsupportedError("COPY force null only available using COPY FROM")
    if delim in null:
        raise UnsupportedError("COPY delimiter must not appear in the NULL specification")
    if csv and quote is not None and quote in null:
        raise UnsupportedError("CSV quote character must not appear in the NULL specification")

    quoted = [force_all] * len(columns)
    if force_quote is not None:
        taken: set[int] = set()
        for col in force_quote:
            pos = next((i for i, c in enumerate(columns) if c == col), None)
            if pos is None:
                raise UndefinedColumnError(f'column "{col}" does not exist')
            if pos in taken:
                raise DuplicateColumn(f'column "{col}" specified more than once')
            taken.add(pos)
            quoted[pos] = True
    return CopyTo(
        format="binary" if binary else "csv" if csv else "text",
        header=bool(header),
        delimiter=delim,
        null=null,
        quote=quote if quote is not None else '"',
        escape=escape if escape is not None else '"',
        force_quote=tuple(quoted),
    )


# ---------------------------------------------------------------------------- commands

_COMMAND_VERBS = frozenset(
    {"fetch", "move", "close", "execute", "deallocate", "declare", "prepare"}
)


def command(text: str) -> Command | None:
    """The command ``text`` is when it addresses a cursor or a prepared statement by name
    (FETCH, MOVE, CLOSE, EXECUTE, DEALLOCATE; DECLARE and PREPARE for the names they take);
    None for anything else, or when it does not parse (the backend then reports it)."""
    try:
        return _command(text)
    except _LexError:
        return None


def verb(text: str) -> str | None:
    """The first keyword of ``text`` (folded) when it is one :func:`command` reads."""
    try:
        t = next(_tokens(text), None)
    except _LexError:
        return None
    return t.value if t is not None and t.kind == "word" and t.value in _COMMAND_VERBS else None


def _command(text: str) -> Command | None:
    v = verb(text)
    if v is None:
        return None
    if v in ("declare", "prepare"):
        located = _locate(text)
        if located is None or located.kind != v:
            return None
        name = located.head[1].value
        return NamesCursor(name) if v == "declare" else NamesStatement(name)
    toks = _all_tokens(text)
    if toks is None:
        return None
    while toks and toks[-1].kind == "op" and toks[-1].value == ";":
        toks.pop()
    rest = toks[1:]
    if v in ("fetch", "move"):
        return _fetch(rest, move=v == "move")
    if v == "close":
        if len(rest) == 1 and rest[0].kind == "word" and rest[0].value == "all":
            return CloseCursor(None)
        if len(rest) == 1 and rest[0].kind in ("word", "name"):
            return CloseCursor(rest[0].value)
        return None
    if v == "deallocate":
        if rest and rest[0].kind == "word" and rest[0].value == "prepare":
            rest = rest[1:]
        if len(rest) == 1 and rest[0].kind == "word" and rest[0].value == "all":
            return Deallocate(None)
        if len(rest) == 1 and rest[0].kind in ("word", "name"):
            return Deallocate(rest[0].value)
        return None
    # execute
    if not rest or rest[0].kind not in ("word", "name"):
        return None
    name = rest[0].value
    if len(rest) == 1:
        return ExecutePrepared(name, ())
    if not (rest[1].kind == "op" and rest[1].value == "(" and rest[-1].value == ")"):
        return None
    if len(rest) == 3:
        return None  # EXECUTE p(): a syntax error
    return ExecutePrepared(name, _arguments(rest[2:-1]))


_Direction: TypeAlias = Literal["forward", "backward", "absolute", "relative"]
_SHORT_DIRECTIONS: dict[str | None, tuple[_Direction, int]] = {
    "next": ("forward", 1),
    "prior": ("backward", 1),
    "first": ("absolute", 1),
    "last": ("absolute", -1),
}


def _fetch(rest: list[Token], *, move: bool) -> Fetch | None:
    if not rest or rest[-1].kind not in ("word", "name"):
        return None
    name = rest[-1].value
    body = rest[:-1]
    if body and body[-1].kind == "word" and body[-1].value in ("from", "in"):
        body = body[:-1]
    direction: _Direction = "forward"
    count: int | None = 1
    if not body:
        return Fetch(name, direction, count, move)
    w = body[0].value if body[0].kind == "word" else None
    args = body[1:]
    if w in _SHORT_DIRECTIONS and not args:
        direction, count = _SHORT_DIRECTIONS[w]
    elif w == "all" and not args:
        count = None
    elif w == "absolute" or w == "relative":
        n = _signed(args)
        if n is None:
            return None
        direction, count = ("absolute" if w == "absolute" else "relative"), n
    elif w == "forward" or w == "backward":
        direction = "forward" if w == "forward" else "backward"
        if len(args) == 1 and args[0].kind == "word" and args[0].value == "all":
            count = None
        elif args:
            count = _signed(args)
            if count is None:
                return None
    elif w is None:
        n = _signed(body)
        if n is None:
            return None
        count = n
    else:
        return None
    return Fetch(name, direction, count, move)


def _signed(toks: Sequence[Token]) -> int | None:
    """SignedIconst: an integer, maybe with a sign."""
    sign = 1
    if len(toks) == 2 and toks[0].kind == "op" and toks[0].value in ("+", "-"):
        sign = -1 if toks[0].value == "-" else 1
        toks = toks[1:]
    if len(toks) != 1 or toks[0].kind != "number" or not toks[0].value.isdigit():
        return None
    value = int(toks[0].value)
    return sign * value if value < 2**31 else None


def _arguments(toks: list[Token]) -> tuple[str | None, ...] | None:
    """EXECUTE's arguments when each is a constant (a number, a string, NULL, TRUE/FALSE,
    maybe signed or cast); None otherwise."""
    args: list[str | None] = []
    groups: list[list[Token]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "op" and t.value == "(":
            depth += 1
        elif t.kind == "op" and t.value == ")":
            depth -= 1
        if depth == 0 and t.kind == "op" and t.value == ",":
            groups.append([])
        else:
            groups[-1].append(t)
    if groups == [[]]:
        return ()
    for g in groups:
        # a cast at the end (::type) leaves the constant's text as it is
        if len(g) >= 3 and g[-2].kind == "op" and g[-2].value == "::" and g[-1].kind == "word":
            g = g[:-2]
        if len(g) == 2 and g[0].kind == "op" and g[0].value in ("+", "-") and g[1].kind == "number":
            args.append(("-" if g[0].value == "-" else "") + g[1].value)
        elif len(g) == 1 and (
            g[0].kind in ("number", "string")
            or (g[0].kind == "word" and g[0].value in ("true", "false"))
        ):
            args.append(g[0].value)
        elif len(g) == 1 and g[0].kind == "word" and g[0].value == "null":
            args.append(None)
        else:
            return None
    return tuple(args)


class _Matcher:
    """:func:`locate` with the interface of a compiled pattern (``MATCHER.match(text)``)."""

    def match(self, text: str) -> Located | None:
        return locate(text)


MATCHER = _Matcher()
