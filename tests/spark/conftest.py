"""One local Spark session for every Spark test, and a small generated history."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import Expected, expected_state
from spark_batch.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """``local[2]``, UI off, two shuffle partitions: small data, shared cores."""
    session = spark_session(
        "converge-tests",
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


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
