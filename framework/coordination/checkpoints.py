"""The checkpoint store contract: small named values changed by compare-and-set.

A checkpoint has a name (``a/b/c``: segments of letters, digits, ``_ . -``),
a text value and a version: 0 when created, +1 on every successful set. Every
write states the version it expects (``None``: the checkpoint must not exist
yet), so two jobs racing on one checkpoint never overwrite each other: the
loser gets ``CheckpointConflict`` and re-reads.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass

from framework.core.errors import ConvergeError, Transient

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "BlockingCheckpointStore",
    "CheckpointError",
    "CheckpointConflict",
    "CheckpointUnavailable",
    "check_name",
    "check_value",
    "MAX_VALUE_BYTES",
]

#: Largest checkpoint value accepted, in UTF-8 bytes (well under ZooKeeper's 1 MiB znode limit).
MAX_VALUE_BYTES = 64 * 1024
_SEGMENT = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
_MAX_NAME = 255


class CheckpointError(ConvergeError, ValueError):
    """A checkpoint name or value is malformed."""


class CheckpointConflict(CheckpointError):
    """The stored version is not the expected one (``actual`` is None when the checkpoint is absent)."""

    def __init__(self, name: str, expected: int | None, actual: int | None) -> None:
        super().__init__(f"checkpoint {name!r}: expected version {expected}, found {actual}")
        self.name = name
        self.expected = expected
        self.actual = actual


class CheckpointUnavailable(Transient):
    """The backend cannot be reached now; the operation may be retried."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A stored checkpoint: its name, value and version."""

    name: str
    value: str
    version: int


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid checkpoint name, else raise CheckpointError."""
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME:
        raise CheckpointError(f"checkpoint name must be a string of 1..{_MAX_NAME} characters: {name!r}")
    for segment in name.split("/"):
        if not _SEGMENT.fullmatch(segment) or segment in (".", ".."):
            raise CheckpointError(
                f"checkpoint name {name!r}: segments are 1..100 of [A-Za-z0-9_.-], not '.' or '..'"
            )
    return name


def check_value(value: object) -> str:
    """Return ``value`` if it is storable text, else raise CheckpointError."""
    if not isinstance(value, str):
        raise CheckpointError(f"checkpoint value must be a string, got {type(value).__name__}")
    if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
        raise CheckpointError(f"checkpoint value larger than {MAX_VALUE_BYTES} bytes")
    return value


def check_expected(expected: object) -> int | None:
    """Return ``expected`` if it is None or a non-negative int, else raise CheckpointError."""
    if expected is None:
        return None
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise CheckpointError(f"expected version must be None or an int >= 0, got {expected!r}")
    return expected


class CheckpointStore(abc.ABC):
    """Named checkpoints with compare-and-set writes."""

    @abc.abstractmethod
    async def get(self, name: str) -> Checkpoint | None:
        """The checkpoint ``name``, or None when it does not exist."""

    @abc.abstractmethod
    async def compare_and_set(self, name: str, value: str, expected_version: int | None) -> Checkpoint:
        """Write ``value`` if the stored version is ``expected_version`` (None: absent).

        Returns the new checkpoint (version 0 when created, else expected + 1);
        raises CheckpointConflict, leaving the stored checkpoint unchanged, otherwise.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the connection."""

    async def __aenter__(self) -> CheckpointStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class BlockingCheckpointStore(CheckpointStore):
    """A checkpoint store that also answers blocking calls (``*_sync``), for threads and drivers."""

    @abc.abstractmethod
    def get_sync(self, name: str) -> Checkpoint | None:
        """``get``, blocking."""

    @abc.abstractmethod
    def compare_and_set_sync(self, name: str, value: str, expected_version: int | None) -> Checkpoint:
        """``compare_and_set``, blocking."""

    @abc.abstractmethod
    def close_sync(self) -> None:
        """``close``, blocking."""
