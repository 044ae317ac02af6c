"""Statements that would change who an analyst is upstream: refused before they are relayed.

The proxy logs in to the database as each analyst's own role (``lapras_user_<name>``), with a
password only the proxy knows, and the role's login is closed except while the proxy logs in
(:mod:`proxy.doors`, docs/admin.md). PostgreSQL lets any role change its own password, so an
analyst who could run ``ALTER ROLE current_user PASSWORD '…'`` would know a password of the
role; the database layer makes that useless (the login stays closed, and the proxy sets its
own password again at every login), and this pass refuses it first, with a message that says
why. Refused (42501), in every spelling the tokenizer reads (comments, case, quoting):

- ``ALTER``, ``CREATE`` and ``DROP`` of ``ROLE``, ``USER`` or ``GROUP`` (psql's ``\\password``
  sends ``ALTER USER "…" PASSWORD 'SCRAM-SHA-256$…'``; ``ALTER USER MAPPING`` stores another
  server's credentials);
- ``SET [SESSION | LOCAL] ROLE`` and ``SET [SESSION | LOCAL] SESSION AUTHORIZATION`` to a role,
  and ``SET role``/``SET session_authorization`` as settings (the database refuses them too:
  an analyst's role is a member of no role it may become). ``SET ROLE NONE``, ``SET SESSION
  AUTHORIZATION DEFAULT`` and ``RESET ROLE`` change nothing and are relayed.

>>> refusal(["ALTER", "ROLE", "current_user", "PASSWORD", "'x'"]) is not None
True
>>> refusal(["SET", "ROLE", "NONE"]) is None, refusal(["SELECT", "1"]) is None
(True, True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import RowAccessError

_ROLE_WORDS = frozenset({"ROLE", "USER", "GROUP"})
_SETTINGS = frozenset({"role", "session_authorization"})
_HINT = (
    "the proxy logs in to the database as your role with credentials of its own; your "
    "password for the proxy is set by an administrator ([[users]] in lapras.toml)"
)

#: The words that start a statement this pass may refuse: a statement beginning with none of
#: them (after comments and white space) is certainly not one (:func:`may_refuse`).
_FIRST = re.compile(r"(?:\s|--[^\n]*\n?|/\*.*?\*/)*(alter|create|drop|set)\b", re.I | re.S)


def may_refuse(text: str) -> bool:
    """False only when ``text`` certainly starts with none of the statements refused here (a
    cheap test for statements relayed without tokenizing them)."""
    return _FIRST.match(text) is not None


def refusal(words: Sequence[str]) -> RowAccessError | None:
    """The refusal of a statement whose tokens' texts are ``words`` (quoted names without
    their quotes), or None when it changes no role."""
    w = [x.upper() for x in words[:6]]
    if len(w) < 2:
        return None
    if w[0] in ("ALTER", "CREATE", "DROP") and w[1] in _ROLE_WORDS:
        return RowAccessError(
            f"{w[0]} {w[1]} is not allowed through the LAPRAS proxy: analysts' roles and "
            "their credentials are the proxy's",
            hint=_HINT,
        )
    if w[0] != "SET":
        return None
    rest = w[1:]
    if rest[0] == "LOCAL" or rest[:2] in (["SESSION", "ROLE"], ["SESSION", "SESSION"]):
        rest = rest[1:]  # the scope, as in SET SESSION ROLE x (not SET SESSION AUTHORIZATION)
    if rest[:1] == ["ROLE"] and rest[1:2] != ["NONE"]:
        what = "SET ROLE"
    elif rest[:2] == ["SESSION", "AUTHORIZATION"] and rest[2:3] != ["DEFAULT"]:
        what = "SET SESSION AUTHORIZATION"
    elif rest[:1] and rest[0].lower() in _SETTINGS and rest[1:2] in (["="], ["TO"]):
        what = f"SET {rest[0].lower()}"
    else:
        return None
    return RowAccessError(
        f"{what} is not allowed through the LAPRAS proxy: each analyst acts upstream as "
        "its own role",
        hint=_HINT,
    )
