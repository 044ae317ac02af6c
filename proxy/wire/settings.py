"""The session's ``lapras.*`` settings: custom GUCs the proxy reads as well as relays (sans-IO).

``SET lapras.max_error = 50`` is a custom ("placeholder") setting, which PostgreSQL accepts
for any two-part name: the statement is relayed like any SET (so ``SHOW lapras.max_error`` and
``current_setting('lapras.max_error')`` answer on the backend, and with transaction pooling the
session's SETs follow it to its next backend connection: :mod:`proxy.wire.pool`). The proxy
also tracks the value for itself, in the client's session (:class:`SessionSettings`), since
it answers DP statements without asking the backend: each statement the session routes is
shown to :meth:`SessionSettings.observe` first, in order.

PostgreSQL's semantics are followed:

- a start-up value (``options=-c lapras.max_error=50``, or the parameter itself in the start-up
  packet) is the session's default, which ``RESET`` returns to;
- ``SET`` / ``SET SESSION`` takes effect at once; inside a transaction block it is undone if
  the block rolls back (``ROLLBACK``, ``ABORT``, a ``COMMIT`` of a failed block, ``ROLLBACK
  TO SAVEPOINT`` back past it); ``SET LOCAL`` lasts until the block ends;
- ``RESET name``, ``SET name TO DEFAULT``, ``RESET ALL`` and ``DISCARD ALL`` return to the
  default; ``SELECT set_config('lapras.name', 'value', is_local)`` is read like a SET.

What is not followed: a SET that fails on the backend for another reason (the proxy checks
``lapras.max_error``'s value itself and refuses an invalid one before it is relayed); a
simple-protocol message of several statements whose later statement fails (PostgreSQL rolls
the implicit transaction back, SET included); a prepared SET executed again without a new
Parse (the extended protocol is read at Parse). The value only ever decides how accurate an
answer must be -- never what is private.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

#: The prefix of the settings tracked here.
PREFIX = "lapras."

_LEAD = r"^(?:\s|--[^\n]*\n?|/\*.*?\*/)*"
_NAME = r"(?P<name>lapras\.[a-z_][a-z0-9_$]*|\"lapras\.[^\"]+\")"
_SET = re.compile(
    _LEAD + r"SET\s+(?:(?P<scope>SESSION|LOCAL)\s+)?" + _NAME + r"\s*(?:=|\bTO\b)\s*(?P<value>.*?)"
    r"\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_RESET = re.compile(
    _LEAD + r"RESET\s+(?:" + _NAME + r"|(?P<all>ALL))\s*;?\s*$", re.IGNORECASE | re.DOTALL
)
_DISCARD = re.compile(_LEAD + r"DISCARD\s+ALL\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_SET_CONFIG = re.compile(
    r"\bset_config\s*\(\s*'(?P<name>lapras\.[a-z_][a-z0-9_$]*)'\s*,\s*'(?P<value>(?:[^']|'')*)'"
    r"\s*,\s*(?P<local>true|false)\s*\)",
    re.IGNORECASE,
)
_BEGIN = re.compile(_LEAD + r"(?:BEGIN|START\s+TRANSACTION)\b", re.IGNORECASE | re.DOTALL)
_COMMIT = re.compile(
    _LEAD + r"(?:COMMIT|END)\b(?!\s+PREPARED)(?P<chain>.*\bAND\s+CHAIN\b)?",
    re.IGNORECASE | re.DOTALL,
)
_ROLLBACK = re.compile(
    _LEAD
    + r"(?:ROLLBACK|ABORT)\b(?!\s+PREPARED)(?:\s+(?:WORK|TRANSACTION))?"
    + r"(?:\s+TO\s+(?:SAVEPOINT\s+)?(?P<to>\S+?))?\s*(?P<chain>AND\s+CHAIN\b)?",
    re.IGNORECASE | re.DOTALL,
)
_SAVEPOINT = re.compile(_LEAD + r"SAVEPOINT\s+(?P<name>\S+?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_RELEASE = re.compile(
    _LEAD + r"RELEASE\s+(?:SAVEPOINT\s+)?(?P<name>\S+?)\s*;?\s*$", re.IGNORECASE | re.DOTALL
)
#: A cheap first test: a statement that may matter starts with one of these words, or
#: mentions the prefix.
_MAYBE = re.compile(
    _LEAD + r"(?:SET|RESET|DISCARD|BEGIN|START|COMMIT|END|ROLLBACK|ABORT|SAVEPOINT|RELEASE)\b",
    re.IGNORECASE | re.DOTALL,
)

Kind = Literal["set", "local", "reset", "reset_all"]


@dataclass(frozen=True, slots=True)
class Change:
    """A change of ``lapras.*`` settings: ``set`` / ``local`` (``value``), ``reset`` (to the
    default) or ``reset_all``."""

    kind: Kind
    name: str = ""
    value: str = ""


def _unquote(value: str) -> str | None:
    """A SET's value as PostgreSQL reads it: a quoted string, or one bare word/number; None
    for ``DEFAULT``. Several values (a list) are kept as written (the check refuses them)."""
    v = value.strip()
    if len(v) >= 2 and v[0] == "'" and v[-1] == "'":
        return v[1:-1].replace("''", "'")
    if v.upper() == "DEFAULT":
        return None
    return v


def _name(raw: str) -> str:
    return raw.strip('"') if raw.startswith('"') else raw.lower()


def changes(sql: str) -> list[Change]:
    """The ``lapras.*`` changes a statement makes (none for most statements)."""
    m = _SET.match(sql)
    if m is not None:
        value = _unquote(m["value"])
        if value is None:
            return [Change("reset", _name(m["name"]))]
        local = (m["scope"] or "").upper() == "LOCAL"
        return [Change("local" if local else "set", _name(m["name"]), value)]
    m = _RESET.match(sql)
    if m is not None:
        return [Change("reset_all")] if m["all"] else [Change("reset", _name(m["name"]))]
    if _DISCARD.match(sql):
        return [Change("reset_all")]
    return [
        Change(
            "local" if c["local"].lower() == "true" else "set",
            c["name"].lower(),
            c["value"].replace("''", "'"),
        )
        for c in _SET_CONFIG.finditer(sql)
    ]


@dataclass(slots=True)
class _Block:
    """An open transaction block: the session-level changes made in it (in order), its SET
    LOCAL values, and its savepoints (name, changes before it, local values before it)."""

    changes: list[Change] = field(default_factory=list)
    local: dict[str, str | None] = field(default_factory=dict)
    savepoints: list[tuple[str, int, dict[str, str | None]]] = field(default_factory=list)


class SessionSettings:
    """The ``lapras.*`` settings of one client session (see the module doc)."""

    __slots__ = ("_block", "_committed", "_startup")

    def __init__(self, startup: Mapping[str, str] | None = None) -> None:
        self._startup = _startup_values(startup or {})
        self._committed: dict[str, str | None] = {}
        self._block: _Block | None = None

    def get(self, name: str) -> str | None:
        """The setting's value now (None: not set, or reset to no start-up value)."""
        name = name.lower()
        block = self._block
        if block is not None:
            if name in block.local:
                return block.local[name]
            for c in reversed(block.changes):
                if c.kind == "reset_all" or c.name == name:
                    return c.value if c.kind == "set" else self._startup.get(name)
        if name in self._committed:
            return self._committed[name]
        return self._startup.get(name)

    def observe(
        self, sql: str, txn_status: str = "I", check: Callable[[Change], None] | None = None
    ) -> list[Change]:
        """Take in one statement the session is about to run (``txn_status``: the session's
        transaction status before it); returns its ``lapras.*`` changes, applied. ``check``
        sees each change first: when it raises, nothing is applied (the statement is
        refused, and runs nowhere)."""
        if PREFIX not in sql.lower() and not _MAYBE.match(sql):
            return []
        found = changes(sql)
        for c in found:
            if check is not None:
                check(c)
        if txn_status in ("T", "E") and self._block is None:
            self._block = _Block()  # a block began where the proxy did not see it
        if found:
            for c in found:
                self.apply(c)
            return found
        self._transaction(sql, txn_status)
        return []

    def apply(self, change: Change) -> None:
        block = self._block
        if change.kind == "local":
            if block is not None:  # (outside a block SET LOCAL does nothing but warn)
                block.local[change.name] = change.value
            return
        if block is not None:
            if change.kind == "reset_all":
                block.local.clear()
            else:
                block.local.pop(change.name, None)
            block.changes.append(change)
            return
        self._commit([change])

    def _commit(self, done: list[Change]) -> None:
        for c in done:
            if c.kind == "set":
                self._committed[c.name] = c.value
            elif c.kind == "reset":
                self._committed[c.name] = self._startup.get(c.name)
            else:
                self._committed = dict(self._startup)

    def _transaction(self, sql: str, txn_status: str) -> None:
        if _BEGIN.match(sql):
            if self._block is None:
                self._block = _Block()
            return
        block = self._block
        if block is None:
            return
        if m := _COMMIT.match(sql):
            if txn_status != "E":
                self._commit(block.changes)
            self._block = _Block() if m["chain"] else None
            return
        if m := _ROLLBACK.match(sql):
            to = m["to"]
            if to is None:
                self._block = _Block() if m["chain"] else None
                return
            name = to.rstrip(";").lower()
            for i in range(len(block.savepoints) - 1, -1, -1):
                sp, count, local = block.savepoints[i]
                if sp == name:
                    del block.changes[count:]
                    block.local = dict(local)
                    del block.savepoints[i + 1 :]
                    return
            return
        if m := _SAVEPOINT.match(sql):
            block.savepoints.append((m["name"].lower(), len(block.changes), dict(block.local)))
            return
        if m := _RELEASE.match(sql):
            name = m["name"].lower()
            for i in range(len(block.savepoints) - 1, -1, -1):
                if block.savepoints[i][0] == name:
                    del block.savepoints[i:]
                    return


def _startup_values(params: Mapping[str, str]) -> dict[str, str | None]:
    """The ``lapras.*`` values of a start-up packet: as parameters of their own, or in
    ``options`` (``-c name=value`` or ``--name=value``, backslash-escaped spaces)."""
    out: dict[str, str | None] = {}
    for k, v in params.items():
        if k.lower().startswith(PREFIX):
            out[k.lower()] = v
    words = re.split(r"(?<!\\)\s+", params.get("options", "").strip())
    words = [w.replace("\\ ", " ") for w in words if w]
    for i, w in enumerate(words):
        pair = None
        if w == "-c" and i + 1 < len(words):
            pair = words[i + 1]
        elif (w.startswith("-c") and len(w) > 2) or w.startswith("--"):
            pair = w[2:]
        if pair is not None and "=" in pair:
            k, v = pair.split("=", 1)
            if k.lower().startswith(PREFIX):
                out[k.lower()] = v
    return out
