"""One error root: every exception class of framework, stores and spark_batch is a ConvergeError;
the "retry later" ones are Transient and the "this message is bad" ones BadMessage.

The walk imports every module of the three packages; a module whose optional third-party
dependency is not installed is left out (its classes cannot be raised either).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import pytest

from framework.core.errors import BadMessage, ConvergeError, Transient
from framework.runtime.errors import is_transient

PACKAGES = ("framework", "stores", "spark_batch")

#: Errors that mean "retry later": the operation may succeed when tried again.
RETRY_LATER = (
    "framework.coordination.checkpoints.CheckpointUnavailable",
    "framework.coordination.locks.LocksUnavailable",
    "framework.coordination.locks.LeaseLost",
    "framework.jobs.coordinator.TurnLost",
    "framework.delivery.kafka_io.FetchTimeout",
    "framework.runtime.errors.SinkFailure",
    "stores.errors.TransientStoreError",
)

#: Errors that mean "this message is bad": retrying it gives the same failure.
BAD_MESSAGE = (
    "framework.core.events.EventError",
    "framework.core.mutations.MutationError",
    "framework.core.schema.SchemaError",
    "framework.delivery.acks.AckFormatError",
    "framework.idmutation.requests.IdRequestError",
    "framework.runtime.errors.MessageError",
    "framework.state.join.PendingFull",
    "stores.elasticsearch.checks.DocumentError",
    "stores.errors.PermanentStoreError",
)


def _modules() -> Iterator[str]:
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield name
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if not info.name.endswith(".__main__"):  # running it is the command line itself
                yield info.name


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in PACKAGES:
                raise
            continue  # an optional dependency is missing
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


CLASSES = _exception_classes()


def _named(path: str) -> type[BaseException]:
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, BaseException)
    return cls


def test_the_walk_finds_the_errors() -> None:
    assert "framework.core.errors.ConvergeError" in CLASSES
    assert len(CLASSES) > 30


@pytest.mark.parametrize("path", sorted(CLASSES))
def test_every_error_is_a_converge_error(path: str) -> None:
    assert issubclass(CLASSES[path], ConvergeError), f"{path} does not derive from ConvergeError"


@pytest.mark.parametrize("path", RETRY_LATER)
def test_retry_later_errors_are_transient(path: str) -> None:
    cls = _named(path)
    assert issubclass(cls, Transient) and not issubclass(cls, BadMessage)


@pytest.mark.parametrize("path", BAD_MESSAGE)
def test_bad_message_errors_are_bad_messages(path: str) -> None:
    cls = _named(path)
    assert issubclass(cls, BadMessage) and not issubclass(cls, Transient)


def test_only_transient_errors_are_retried_by_the_runtime() -> None:
    assert is_transient(Transient("down"))
    assert not is_transient(BadMessage("bad"))
    assert not is_transient(ConvergeError("neither"))
