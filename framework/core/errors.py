"""The error base classes every layer subclasses, split by what the runtime does with them."""

from __future__ import annotations

__all__ = ["ConvergeError", "BadMessage", "Transient"]


class ConvergeError(Exception):
    """Base of converge's own errors."""


class BadMessage(ConvergeError, ValueError):
    """The message itself is bad: retrying gives the same failure, so it is parked.

    Parse, validation, mapping and schema errors subclass it, and so do
    permanent store rejections of a write (4xx other than 409/429).
    """


class Transient(ConvergeError):
    """Retry later: timeout, connection lost, unavailable, overloaded (5xx, 429)."""
