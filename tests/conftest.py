"""Shared fixtures: the embedded stack (noida-db) and temporary data dirs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.local_stack import LocalStack, StackInfo

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    """One noida-db (Kafka + Elasticsearch) for the whole session."""
    s = LocalStack(tmp_path_factory.mktemp("stack"))
    info = s.start()
    try:
        yield info
    finally:
        s.stop()


@pytest.fixture()
def fresh_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A noida-db of its own, for crash tests: ``.restart()`` clears consumers killed with SIGKILL."""
    s = LocalStack(tmp_path / "stack")
    s.start()
    try:
        yield s
    finally:
        s.stop()
