"""The root of the project's one error hierarchy.

Every error that may reach a client is a :class:`LaprasError` subclass that declares its
SQLSTATE and severity; the proxy renders it as an ErrorResponse. Messages must never contain a
data-dependent value (ARCHITECTURE.md §4): say what was refused, why, and what is accepted.
The hierarchy is rooted here, in the lowest layer, so that ``rewriter`` and ``proxy`` extend it
without the arrows of the layering ever pointing up.
"""

from __future__ import annotations

from typing import ClassVar, Literal

Severity = Literal["ERROR", "FATAL", "PANIC"]


class LaprasError(Exception):
    """Base class: an error with a PostgreSQL SQLSTATE, a severity and optional fields."""

    sqlstate: ClassVar[str] = "XX000"
    severity: ClassVar[Severity] = "ERROR"

    def __init__(
        self,
        message: str,
        *,
        detail: str | None = None,
        hint: str | None = None,
        position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position


class InternalError(LaprasError):
    """A bug: something that should not happen. Rendered with a generic message."""

    sqlstate = "XX000"


class PrivacyParameterError(LaprasError):
    """An invalid privacy parameter (epsilon, delta, split, stream length...)."""

    sqlstate = "22023"


class BudgetExhaustedError(LaprasError):
    """The epoch cannot admit a fresh release: budget, reserve or stream length used up.

    A private class-42 code: class 42 tells drivers the statement itself will keep failing,
    so they do not retry it.
    """

    sqlstate = "42Q01"


class DomainTooLargeError(LaprasError):
    """A domain or view exceeds the configured cell limit."""

    sqlstate = "54000"
