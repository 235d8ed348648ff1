"""benchmarks.profile_buckets: py-spy stacks of a worker attributed to the parts of its path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.profile_buckets import (
    Profile,
    _load,
    bucket_of,
    idle,
    read_samples,
    report,
    report_runs,
    thread_of,
)

ROOT = "_run_module_as_main (<frozen runpy>:198);run_worker (framework/worker/run.py:93);" \
    "Worker.execute_from_commandline (mode/worker.py:264)"  # fmt: skip
STORE = "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982);" \
    "_worker (concurrent/futures/thread.py:83);_WorkItem.run (concurrent/futures/thread.py:58)"  # fmt: skip

RAW = f"""\
{STORE};SqliteStore._flush_group (stores/sqlite/store.py:110);SqliteEngine.apply (stores/sqlite/engine.py:300) 30
{STORE};SqliteEngine.read_partitions (stores/sqlite/engine.py:439);SqliteEngine._rows (stores/sqlite/engine.py:520) 10
Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982);_worker (concurrent/futures/thread.py:81) 500
{ROOT} 200
{ROOT};run_batch (framework/runtime/batch.py:60);ProjectionProcessor.write_batch (framework/runtime/projector.py:160);ProjectionProcessor._project (framework/runtime/projector.py:170) 20
{ROOT};run_batch (framework/runtime/batch.py:70);AgentProcessor.write_batch (framework/runtime/processor.py:199);bounded (framework/runtime/processor.py:110);ChangeFeedSink.write_batch (framework/runtime/change_feed.py:157);dumps (json/__init__.py:231) 15
{ROOT};run_batch (framework/runtime/batch.py:60);AgentProcessor.map_batch (framework/runtime/processor.py:190);map_event (framework/runtime/mapping.py:40);ActivitiesAgent.handle (agents/activities.py:50) 15
{ROOT};Service._execute_task (mode/services.py:843);Fetcher._fetcher (faust/transport/consumer.py:1000);Consumer._drain_messages (faust/transport/consumer.py:1200);Consumer.getmany (faust/transport/consumer.py:1300);App.create_event (faust/app/base.py:1547) 5
{ROOT};Agent._execute_actor (faust/agents/agent.py:700);AgentRuntime._consume (framework/runtime/binding.py:259);Work.__init__ (<string>:3) 5
"""  # noqa: E501 - py-spy's lines


def test_each_stack_goes_to_its_thread_and_bucket() -> None:
    samples = read_samples(RAW.splitlines())
    got = {(thread_of(s), idle(s) or bucket_of(s)): s.count for s in samples}
    assert got == {
        ("store", "store thread: apply (writes, commit)"): 30,
        ("store", "store thread: reads"): 10,
        ("store", "idle"): 500,
        ("main", "event loop (uvloop C: I/O and polling)"): 200,
        ("main", "projector (read, build, skip)"): 20,
        ("main", "change feed: build and produce records"): 15,
        ("main", "parse and map"): 15,
        ("main", "Faust: event and message objects"): 5,
        ("main", "runtime: batches, keys, scheduling"): 5,
    }


def test_report_divides_each_threads_cpu_among_its_buckets() -> None:
    profile = Profile.of(read_samples(RAW.splitlines()))
    run = {
        "source_messages": 1000,
        "thread_names": {"1": "MainThread", "2": "converge-sqlite_0"},
        "threads": {"1": {"cpu": 0.06}, "2": {"cpu": 0.04}, "3": {"cpu": 0.01}},
    }
    text = report(profile, run)
    # the store thread's 0.04 s: 3/4 to apply, 1/4 to reads; the main thread's 0.06 s by 20:15:15:5:5
    assert "| store thread: apply (writes, commit) | 30 | 30.0 % | 30.0 % |" in text
    assert "| store thread: reads | 10 | 10.0 % | 10.0 % |" in text
    assert "| projector (read, build, skip) | 20 | 20.0 % | 20.0 % |" in text
    assert "| parse and map | 15 | 15.0 % | 15.0 % |" in text
    assert "attributed 100 µs/event" in text
    assert "(CPU of threads without samples, in no bucket: 0.01 s)" in text  # thread 3: no Python name
    assert "store/idle 500" in text


def test_under_gil_sampling_the_event_loops_own_frames_are_work() -> None:
    profile = Profile.of(read_samples(RAW.splitlines()), gil=True)
    assert profile.buckets[("main", "event loop (uvloop C: I/O and polling)")] == 200
    assert profile.excluded == {("store", "idle"): 500}


def test_a_line_that_is_not_a_stack_is_named() -> None:
    with pytest.raises(ValueError, match="line 2"):
        read_samples(["a (b.py:1) 3", "no count here"])


def test_runs_give_medians_and_ranges(tmp_path: Path) -> None:
    runs = []
    for i, cpu in enumerate((0.04, 0.08, 0.06)):
        run = {
            "source_messages": 1000, "seconds": 2.0, "worker_cpu_s": 0.1, "broker_cpu_s": 0.05,
            "uptime_before": "load average: 1.00, 1, 1", "uptime_after": "load average: 2.00, 1, 1",
            "thread_names": {"1": "MainThread", "2": "converge-sqlite_0"},
            "threads": {"1": {"cpu": 0.06}, "2": {"cpu": cpu}}, "broker_threads": {"autosave": 0.4},
        }  # fmt: skip
        (tmp_path / f"r{i}").mkdir()
        (tmp_path / f"r{i}" / "run.json").write_text(json.dumps(run))
        (tmp_path / f"r{i}" / "worker.txt").write_text(RAW)
        runs.append((tmp_path / f"r{i}").name)
    text = report_runs([_load(tmp_path / name, gil=False) for name in runs])
    # apply: 3/4 of the store thread's 40, 80 and 60 µs
    assert "| store thread: apply (writes, commit) | 45 (30–60) |" in text
    assert "| r1 | 500 | 100 | 50 | autosave 0.4 | 100 | 1.00 → 2.00 |" in text
