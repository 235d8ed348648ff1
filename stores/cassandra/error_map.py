"""Driver exceptions mapped to the store's transient / permanent split."""

from __future__ import annotations

from typing import NoReturn

from cassandra import (
    AuthenticationFailed,
    CDCWriteFailure,
    CoordinationFailure,
    DriverException,
    FunctionFailure,
    OperationTimedOut,
    RequestValidationException,
    Timeout,
    Unavailable,
    UnsupportedOperation,
)
from cassandra import protocol as _p
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionBusy, ConnectionException, ProtocolError

from stores.errors import PermanentStoreError, StoreError, TransientStoreError

__all__ = ["map_error", "is_transient", "reraise"]

#: Worth retrying later: timeouts, unavailable replicas, overload, lost connections, server faults.
TRANSIENT: tuple[type[BaseException], ...] = (
    OperationTimedOut,
    Timeout,  # ReadTimeout, WriteTimeout
    Unavailable,
    CoordinationFailure,  # ReadFailure, WriteFailure
    CDCWriteFailure,
    NoHostAvailable,
    ConnectionException,
    ConnectionBusy,
    _p.OverloadedErrorMessage,
    _p.IsBootstrappingErrorMessage,
    _p.TruncateError,
    _p.ServerError,
    _p.CDCWriteException,
    _p.ClientWriteError,
    TimeoutError,  # also asyncio.TimeoutError
)

#: The same request will fail again: bad CQL, bad values, missing table, no permission.
PERMANENT: tuple[type[BaseException], ...] = (
    RequestValidationException,  # InvalidRequest, Unauthorized, ConfigurationException, AlreadyExists
    _p.RequestValidationException,  # SyntaxException and the raw server messages
    _p.ProtocolException,
    _p.BadCredentials,
    AuthenticationFailed,
    FunctionFailure,
    _p.FunctionFailureMessage,
    UnsupportedOperation,
    ProtocolError,
)


def is_transient(exc: BaseException) -> bool | None:
    """True for retryable errors, False for permanent ones, None when unknown."""
    if isinstance(exc, TRANSIENT):
        return True
    if isinstance(exc, PERMANENT):
        return False
    return None


def map_error(exc: BaseException, what: str) -> BaseException:
    """The store error for a driver failure of ``what``; other exceptions are returned unchanged.

    Unknown driver exceptions count as transient; non-driver exceptions (bugs)
    are returned as they are so they are not mistaken for a bad message.
    """
    if isinstance(exc, StoreError):
        return exc
    verdict = is_transient(exc)
    if verdict is None and isinstance(exc, (DriverException, _p.ErrorMessage)):
        verdict = True
    if verdict is None:
        return exc
    cls = TransientStoreError if verdict else PermanentStoreError
    err = cls(f"{what}: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def reraise(exc: BaseException, what: str) -> NoReturn:
    """Raise the store error for ``exc`` (chained to it), or ``exc`` itself when not a driver failure."""
    mapped = map_error(exc, what)
    if mapped is exc:
        raise exc
    raise mapped from exc
