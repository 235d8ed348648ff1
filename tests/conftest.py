"""Shared fixtures: the embedded stack (noida-db, from the test kit's pytest plugin) and fresh stacks."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.local_stack import LocalStack, StackInfo

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# each store a test backfills or ingests into is its own erasure store of record (framework.erasure.record;
# tests/erasure/test_denylist_of_record.py unsets it to check the refusal)
os.environ.setdefault("CONVERGE_DENYLIST_STORE", "target")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--faults-long", action="store_true", default=False,
        help="run the long variants of the fault suite (tests/faults; also CONVERGE_FAULTS_LONG=1)",
    )  # fmt: skip


@pytest.fixture(scope="session")
def stack(converge_stack: StackInfo) -> StackInfo:
    """One noida-db (Kafka + Elasticsearch) for the whole session: the test kit's ``converge_stack``."""
    return converge_stack


@pytest.fixture()
def fresh_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A noida-db of its own, for crash tests: ``.restart()`` clears consumers killed with SIGKILL."""
    s = LocalStack(tmp_path / "stack")
    s.start()
    try:
        yield s
    finally:
        s.stop()
