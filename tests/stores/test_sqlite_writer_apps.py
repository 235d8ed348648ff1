"""Both example apps end to end with the SQLite store written by a child process.

``CONVERGE_STORE_WRITER=process`` for the ``converge worker`` subprocesses (they read it from the
environment they inherit): the activity platform through the demo's convergence check (two
workers, aggregates, projections, duplicates and replays: 0 divergent), the support desk through
its stream test (a worker converging to the oracle and parking exactly the bad events): the same
checks as with the default writer, run again. Each worker's log must show its writer process
started, so a run that never used one fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.examples.support_desk.test_stream as desk_stream
import tests.integration.test_demo as demo
from framework.local_stack import LocalStack

pytestmark = pytest.mark.slow


def _writer_processes(root: Path) -> int:
    """The workers under ``root`` whose log shows a writer process started."""
    logs = [p.read_text(errors="replace") for p in root.rglob("worker.log")]
    return sum("SQLite writer process" in text for text in logs)


@pytest.fixture()
def writer_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_STORE_WRITER", "process")
    monkeypatch.setenv("CONVERGE_LOGLEVEL", "info")


@pytest.mark.usefixtures("writer_process")
def test_the_demo_converges_with_a_writer_process(tmp_path: Path) -> None:
    demo.test_demo_converges_on_a_small_history(tmp_path)
    assert _writer_processes(tmp_path) >= 1


@pytest.mark.usefixtures("writer_process")
def test_the_support_desk_converges_with_a_writer_process(fresh_stack: LocalStack, tmp_path: Path) -> None:
    """On a noida-db of its own: the stream test's topics are the app's, and the session's stack
    holds what that test's own run left on them."""
    assert fresh_stack.info is not None
    run = tmp_path / "run"
    run.mkdir()
    desk_stream.test_a_worker_converges_to_the_oracle_and_parks_bad_events(fresh_stack.info, run)
    assert _writer_processes(run) == 1
