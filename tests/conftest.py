"""Shared fixtures: the embedded stack (noida-db, from the test kit's pytest plugin), fresh stacks and
the one local Spark session of the run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from framework.local_stack import LocalStack, StackInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One ``local[2]`` session (UI off, two shuffle partitions) for every test that runs Spark in
    this process: a JVM starts once a process (each xdist worker), on first use, and stops at its end."""
    from spark_batch.session import spark_session

    session = spark_session(
        "converge-tests",
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


#: Tests that start worker or job processes and kill them, stop services or rebalance groups: one
#: pytest-xdist worker runs them one after another, first, while the other runs the rest.
PROCESS_FAULTS = (
    "tests/faults/",
    "tests/examples/support_desk/test_scale_out.py",
    "tests/integration/test_runtime_kafka.py",
    "tests/jobs/test_ingest_faults.py",
    "tests/jobs/test_ingest_late_notifications.py",
    "tests/state/test_join_worker.py",
    "tests/test_readme.py",
)


def _scope(nodeid: str) -> str:
    """A test's unit of work under xdist: ``process-faults`` for those above, else its module."""
    module = nodeid.split("::", 1)[0]
    return "process-faults" if module.startswith(PROCESS_FAULTS) else module


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The process faults first (stable otherwise), so that xdist hands them out first."""
    items.sort(key=lambda item: _scope(item.nodeid) != "process-faults")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadscope``: each module's tests on one worker, in their order, and the
    process faults (``PROCESS_FAULTS``) all on one worker, one after another."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndProcessFaults(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return ModulesAndProcessFaults(config, log)
