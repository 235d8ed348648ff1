"""How the runtime classifies a failed attempt: retry it, or park the message."""

from __future__ import annotations

from framework.core.errors import BadMessage, Transient

__all__ = ["MessageError", "SinkFailure", "is_io_failure", "is_transient", "error_class", "stage_of"]


class MessageError(BadMessage):
    """The message itself is bad: retrying it gives the same failure. It is parked.

    ``stage`` is where it failed: ``parse``, ``map`` or ``sink``.
    """

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.cause = cause


class SinkFailure(Transient):
    """A transient failure of one sink; ``sink`` names the destination for back-off."""

    def __init__(self, sink: str, cause: BaseException) -> None:
        super().__init__(f"{sink}: {type(cause).__name__}: {cause}")
        self.sink = sink
        self.cause = cause


def is_io_failure(exc: BaseException) -> bool:
    """True when a sink call failed in its I/O: a timeout, a connection or socket error, or
    a ``Transient`` error (e.g. a store's TransientStoreError: its adapter's verdict on 5xx,
    429, unavailable...)."""
    return isinstance(exc, Transient | TimeoutError | OSError)


def is_transient(exc: BaseException) -> bool:
    """The one classification rule: a failed attempt is retried only when a sink's I/O
    failed (``SinkFailure``, raised by ``processor.bounded``; or an I/O failure itself) or
    the whole attempt timed out. Anything else, whatever its class, was raised while
    decoding, validating or mapping the message, or by a sink refusing it: it is parked."""
    return isinstance(exc, SinkFailure) or is_io_failure(exc)


def error_class(exc: BaseException) -> str:
    """A stable name for an error, used to group parked messages."""
    cause = exc.cause if isinstance(exc, MessageError | SinkFailure) else exc
    return type(cause).__name__


def stage_of(exc: BaseException) -> str:
    """Where a parked message failed: parse, map or sink (``unknown`` otherwise)."""
    if isinstance(exc, MessageError):
        return exc.stage
    return "sink" if isinstance(exc, SinkFailure) else "unknown"
