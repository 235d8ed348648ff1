"""How the runtime classifies a failed attempt: retry it, or park the message."""

from __future__ import annotations

from framework.core.events import EventError
from framework.core.mutations import MutationError
from stores.errors import PermanentStoreError

__all__ = ["MessageError", "SinkFailure", "is_transient", "error_class", "stage_of"]


class MessageError(Exception):
    """The message itself is bad: retrying it gives the same failure. It is parked.

    ``stage`` is where it failed: ``parse``, ``map`` or ``sink``.
    """

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.cause = cause


class SinkFailure(Exception):
    """A transient failure of one sink; ``sink`` names the destination for back-off."""

    def __init__(self, sink: str, cause: BaseException) -> None:
        super().__init__(f"{sink}: {type(cause).__name__}: {cause}")
        self.sink = sink
        self.cause = cause


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: timeouts, connection errors, TransientStoreError.

    Message-level errors (MessageError, EventError, MutationError,
    PermanentStoreError) are not. Unknown exceptions count as transient: the
    key stays blocked and is retried rather than dropped.
    """
    return not isinstance(exc, MessageError | EventError | MutationError | PermanentStoreError)


def error_class(exc: BaseException) -> str:
    """A stable name for an error, used to group parked messages."""
    cause = exc.cause if isinstance(exc, MessageError | SinkFailure) else exc
    return type(cause).__name__


def stage_of(exc: BaseException) -> str:
    """Where a parked message failed: parse, map or sink (``unknown`` otherwise)."""
    if isinstance(exc, MessageError):
        return exc.stage
    return "sink" if isinstance(exc, SinkFailure) else "unknown"
