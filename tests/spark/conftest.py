"""A small generated history for the Spark tests (the session is ``tests/conftest.py``'s ``spark``)."""

from __future__ import annotations

import pytest

from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import Expected, expected_state


@pytest.fixture(scope="session")
def history() -> History:
    """About 1,600 deliveries (duplicates, replays, reordering) over ~350 hub rows."""
    return generate_history(17, 1500)


@pytest.fixture(scope="session")
def expected(history: History) -> Expected:
    return expected_state(history.truth)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every Spark test starts or uses a JVM and the embedded stack: slow."""
    for item in items:
        if "/tests/spark/" in str(item.path):
            item.add_marker(pytest.mark.slow)
