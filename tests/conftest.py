"""Shared fixtures (the embedded stack: noida-db, from the test kit's pytest plugin; fresh stacks;
the one local Spark session of the run), the tests' temporary directory, and the units of work and
their order under pytest-xdist."""

from __future__ import annotations

import os
import sys
import tempfile
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

#: The tests' temporary files (``tmp_path``, ``tempfile``, and the processes the tests start) on a RAM
#: disk when the machine has one with room (a run writes a few hundred MB) and TMPDIR names no other
#: place: each commit of a SQLite store or dead-letter WAL segment calls ``fsync``, which costs a
#: disk write on ``/tmp`` and nothing on a RAM disk. No test can tell the difference (they kill
#: processes, never the machine: the page cache keeps what a killed process wrote), so they check
#: the same; the fsync calls still run.
RAM_DISK = Path("/dev/shm")
RAM_DISK_ROOM = 2 << 30


def _ram_disk_has_room() -> bool:
    if not (RAM_DISK.is_dir() and os.access(RAM_DISK, os.W_OK)):
        return False
    fs = os.statvfs(RAM_DISK)
    return fs.f_bavail * fs.f_frsize >= RAM_DISK_ROOM


if "TMPDIR" not in os.environ and _ram_disk_has_room():
    os.environ["TMPDIR"] = str(RAM_DISK)
    tempfile.tempdir = None  # pytest's capture asked for /tmp already: look again


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
    this process: a JVM starts on first use and stops at the process's end (under xdist, one worker
    runs every module of ``SPARK_IN_PROCESS``)."""
    from spark_batch.session import spark_session

    session = spark_session(
        "converge-tests",
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


#: Tests that start worker or job processes and kill them, stop services or rebalance groups: one
#: pytest-xdist worker runs them one after another, first, while the others run the rest.
PROCESS_FAULTS = (
    "tests/faults/",
    "tests/examples/support_desk/test_scale_out.py",
    "tests/integration/test_runtime_kafka.py",
    "tests/jobs/test_ingest_faults.py",
    "tests/jobs/test_ingest_late_notifications.py",
    "tests/state/test_join_worker.py",
    "tests/test_readme.py",
)

#: Modules that run Spark in the pytest process (the ``spark`` fixture, or ``converge spark`` called
#: through ``framework.cli.main``): one worker runs them all, so that a run starts and warms up one
#: JVM, not one a worker. A module that requests ``spark`` must be listed (checked at collection).
SPARK_IN_PROCESS = (
    "tests/spark/",
    "tests/decoders/test_cdc_backfill.py",
    "tests/erasure/test_backfill.py",
    "tests/erasure/test_backfill_record.py",
    "tests/erasure/test_join_backfill.py",
    "tests/idmutation/test_late_requests_spark.py",
    "tests/idmutation/test_resolution_backfill.py",
    "tests/idmutation/test_spark.py",
    "tests/jobs/test_ingest.py",
    "tests/jobs/test_ingest_slow_store.py",
    "tests/jobs/test_ingest_stray_keys.py",
    "tests/notifications/test_spark_changes.py",
    "tests/retention/test_backfill.py",
    "tests/retention/test_spark.py",
    "tests/retention/test_spark_aggregates.py",
    "tests/retention/test_tenant_spark.py",
)

#: The other modules that take 20 s or more (-n 0, longest first: an install into a fresh venv, the
#: stack's CLI, Hypothesis properties through the test kit's Driver): handed out next, so that the
#: short modules come last and even out the two workers' ends.
LONG_MODULES = (
    "tests/install/test_bare_install.py",
    "tests/test_local_stack.py",
    "tests/runtime/test_batch_equivalence.py",
    "tests/agents/test_convergence.py",
    "tests/cql_server/test_demo_over_cql.py",
    "tests/examples/support_desk/test_kit.py",
    "tests/examples/support_desk/test_aggregates.py",
    "tests/agents/test_aggregates.py",
    "tests/stores/test_cassandra_cql_server.py",
    "tests/erasure/test_property.py",
    "tests/runtime/test_written.py",
    "tests/test_keys.py",
    "tests/erasure/test_join_property.py",
    "tests/state/test_entry_batches.py",
    "tests/runtime/test_scheduler.py",
    "tests/test_events.py",
    "tests/cli/test_cli.py",
    "tests/dlq/test_bucket.py",
    "tests/metrics/test_live_worker.py",
    "tests/erasure/test_support_desk.py",
    "tests/erasure/test_id_routes_property.py",
    "tests/stores/test_convergence_sqlite.py",
    "tests/aggregates/test_driver.py",
    "tests/test_kafka_admin.py",
    "tests/stores/test_sqlite_engine.py",
    "tests/integration/test_demo.py",
    "tests/delivery/test_verifier_properties.py",
    "tests/install/test_extras.py",
    "tests/examples/support_desk/test_mail_moves.py",
    "tests/testing/test_lookup_topics.py",
)


def _scope(nodeid: str) -> str:
    """A test's unit of work under xdist: ``process-faults`` or ``spark`` for the modules above,
    else its module."""
    module = nodeid.split("::", 1)[0]
    if module.startswith(PROCESS_FAULTS):
        return "process-faults"
    if module.startswith(SPARK_IN_PROCESS):
        return "spark"
    return module


def _rank(nodeid: str) -> tuple[int, int]:
    """The order xdist hands the units out in: process faults, Spark, the long modules (longest
    first), the rest."""
    scope = _scope(nodeid)
    if scope == "process-faults":
        return (0, 0)
    if scope == "spark":
        return (1, 0)
    return (2, LONG_MODULES.index(scope)) if scope in LONG_MODULES else (3, 0)


#: How much nicer an xdist worker gets (every thread, and the processes it starts from then on) once
#: it runs anything but the process faults: the faults' workers, brokers and kill/restart timings get
#: a core first when they need one (a fifth of a core on average: they mostly wait on the broker;
#: at 10, about 90 % of a core against a busy worker, where 5 gives 75 %), and the CPU-bound modules
#: of the other workers take the rest, so that ``-n 3`` keeps two cores busy.
BACKGROUND_NICE = 10
_START_NICE = os.getpriority(os.PRIO_PROCESS, 0)
_reniced = False


def _renice(niceness: int) -> None:
    """Lower this process's priority to ``niceness`` (never raise it): each thread's (Linux keeps
    one per thread; the threads started later and the children inherit the calling thread's)."""
    for task in Path("/proc/self/task").iterdir():
        try:
            if os.getpriority(os.PRIO_PROCESS, int(task.name)) < niceness:
                os.setpriority(os.PRIO_PROCESS, int(task.name), niceness)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under xdist, a worker about to run a test that is not a process fault runs
    ``BACKGROUND_NICE`` nicer than it started from then on (the process faults run first, on a
    worker of their own)."""
    global _reniced
    if not _reniced and os.environ.get("PYTEST_XDIST_WORKER") and _scope(item.nodeid) != "process-faults":
        _renice(min(19, _START_NICE + BACKGROUND_NICE))
        _reniced = True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Sort the tests by ``_rank`` (stable otherwise), so that xdist hands their units out in that
    order; refuse a module that requests ``spark`` without being in ``SPARK_IN_PROCESS``."""
    unlisted = sorted(
        {
            item.nodeid.split("::", 1)[0]
            for item in items
            if "spark" in getattr(item, "fixturenames", ()) and _scope(item.nodeid) != "spark"
        }
    )
    if unlisted:
        raise pytest.UsageError(f"tests/conftest.py: add {', '.join(unlisted)} to SPARK_IN_PROCESS")
    items.sort(key=lambda item: _rank(item.nodeid))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadscope``: each module's tests on one worker, in their order; the process
    faults (``PROCESS_FAULTS``) all on one worker, one after another, and the modules that run Spark
    in process (``SPARK_IN_PROCESS``) all on one worker; units handed out in ``_rank``'s order."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return Units(config, log)
