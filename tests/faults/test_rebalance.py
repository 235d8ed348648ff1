"""Scaling the reference app out and back with data flowing: 1 -> 2 -> 3 -> 2 -> 1 workers.

Real parts: a noida-db of its own, ``converge worker`` subprocesses of the activity
platform (each with its data dir and web port) sharing one SQLite store. A feeder
produces the history in small chunks the whole time. A third worker leaves with
SIGINT, a second with SIGKILL (noida-db keeps a killed member: the survivors'
group watch removes it). After each step the group must be Stable with the live
workers, each holding partitions, within ``SETTLE_S``; no partition with lag may
go without a commit for more than ``GAP_S``; ``converge status`` of a live worker
must give the broker's figures: committed and end offsets only grow, so each
partition's pair in the status must lie between two broker readings taken
around it, and its lag is their difference. At the
end the group drains and the store and index match the oracle of the history. The
long variant (``--faults-long``) runs ten such rounds one after another.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from examples.activity_platform.generator import generate_history
from framework.kafka_admin import GroupReader, wait_group_settled
from framework.local_stack import LocalStack, free_port
from framework.metrics import names
from framework.metrics.snapshot import FRESH_S
from framework.metrics.summary import fetch_metrics, summarize
from framework.worker.processes import kill_worker, start_worker, stop_worker
from tests.faults.conftest import FaultPlan
from tests.support.fault_figures import FaultFigures
from tests.support.reference_runs import REFERENCE_WORKER, ReferenceRun

pytestmark = pytest.mark.faults

SETTLE_S = 30.0  # a rebalance completes (or is recovered) within this
GAP_S = 30.0  # no partition with lag goes longer without a commit
Offsets = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (committed, end)
EVENTS_PER_ROUND = 9_000  # more than the feeder sends in a round: data flows until the last leave
CHUNK, PACE_S = 40, 0.25  # the feeder: about 160 events/s while the workers come and go


class Feeder:
    """Produces ``events`` in chunks from a thread; ``hold`` pauses it, ``finish`` sends the rest."""

    def __init__(self, run: ReferenceRun, events: list) -> None:  # type: ignore[type-arg]
        self.run, self.events, self.sent = run, events, 0
        self.go, self.done = threading.Event(), threading.Event()
        self.go.set()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while self.sent < len(self.events) and not self.done.is_set():
            self.go.wait()
            self.run.produce(self.events[self.sent : self.sent + CHUNK])
            self.sent += CHUNK
            time.sleep(PACE_S)

    def finish(self) -> None:
        self.done.set()
        self.go.set()
        self.thread.join(60)
        if self.sent < len(self.events):
            self.run.produce(self.events[self.sent :])
            self.sent = len(self.events)


class CommitGaps:
    """Reads the group every second from a thread: the longest time a partition had lag and no
    new commit, per partition."""

    def __init__(self, broker: str, group: str, topics: tuple[str, ...]) -> None:
        self.broker, self.group, self.topics = broker, group, topics
        self.longest: dict[tuple[str, int], float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._loop()), daemon=True)

    async def _loop(self) -> None:
        reader = GroupReader(self.broker, self.group)
        since: dict[tuple[str, int], float] = {}
        last: dict[tuple[str, int], int] = {}
        try:
            while not self.stop.is_set():
                try:
                    r = await reader.read(self.topics)
                except Exception:  # noqa: BLE001 - one failed reading: the next one counts
                    await reader.close()
                else:
                    now = time.monotonic()
                    for tp, end in r.ends.items():
                        c = r.committed.get(tp, 0)
                        if end <= c or c > last.get(tp, -1):
                            since[tp] = now
                        last[tp] = c
                        self.longest[tp] = max(self.longest.get(tp, 0.0), now - since.setdefault(tp, now))
                await asyncio.sleep(1.0)
        finally:
            await reader.close()


async def _broker_offsets(broker: str, group: str, topics: tuple[str, ...]) -> Offsets:
    reader = GroupReader(broker, group)
    try:
        r = await reader.read(topics)
    finally:
        await reader.close()
    return {tp: (r.committed.get(tp, 0), end) for tp, end in r.ends.items()}


def _status_offsets(text: str) -> Offsets:
    """Committed and end offset per partition in a worker's metrics (0 where none committed)."""
    committed: dict[tuple[str, int], int] = {}
    ends: dict[tuple[str, int], int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (names.PARTITION["committed"], names.PARTITION["end"]):
                tp = (sample.labels["topic"], int(sample.labels["partition"]))
                into = committed if sample.name == names.PARTITION["committed"] else ends
                into[tp] = int(sample.value)
    return {tp: (committed.get(tp, 0), end) for tp, end in ends.items()}


@pytest.mark.timeout(2400)
def test_one_app_scaled_out_to_three_workers_and_back_with_data_flowing(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    started = time.monotonic()
    rounds = 10 if fault_plan.long else 1
    history = generate_history(fault_plan.seed + 3, EVENTS_PER_ROUND * rounds)
    events = list(history.events)
    run = ReferenceRun(fresh_stack, tmp_path, partitions=6)  # 3 workers hold 2 each (4 would leave one idle)
    figures = FaultFigures(f"scale 1-2-3-2-1 x{rounds}", events=len(events))
    workers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    settle_times: list[str] = []
    lags: list[tuple[int, int, int]] = []

    def start(name: str) -> None:
        port = free_port()
        run.names.append(name)
        proc = start_worker(REFERENCE_WORKER, run.work / name, run.broker,
                            {**run.env, "CONVERGE_WEB_PORT": str(port)})  # fmt: skip
        workers[name] = (proc, port)

    def settle(what: str) -> None:
        t0 = time.monotonic()
        asyncio.run(wait_group_settled(run.broker, run.app_id, len(workers), SETTLE_S))
        settle_times.append(f"{what} {time.monotonic() - t0:.1f}s")
        for name, (proc, _) in workers.items():
            assert proc.poll() is None, f"{name} died:\n{run.log_tail(name)}"

    def status_lag_matches_the_broker() -> None:
        """Committed and end offsets only grow: every partition's pair in the status must lie
        between two broker readings that bracket the worker's own (at most ``FRESH_S`` old)."""
        name, (_, port) = next(iter(workers.items()))
        before = asyncio.run(_broker_offsets(run.broker, run.app_id, run.topics))
        time.sleep(FRESH_S + 0.5)  # the worker's reading, at most FRESH_S old, was taken after `before`
        text = fetch_metrics(f"http://127.0.0.1:{port}", timeout=10)
        after = asyncio.run(_broker_offsets(run.broker, run.app_id, run.topics))
        shown = _status_offsets(text)
        assert set(shown) == set(after), (name, sorted(set(after) - set(shown)))  # every partition
        for tp, (committed, end) in shown.items():
            (c0, e0), (c1, e1) = before[tp], after[tp]
            assert c0 <= committed <= c1 and e0 <= end <= e1, (name, tp, before[tp], shown[tp], after[tp])
        status_lag = sum(r.lag for r in summarize(text).values())
        assert status_lag == sum(max(0, e - c) for c, e in shown.values())
        lag_of = lambda offsets: sum(e - c for c, e in offsets.values())  # noqa: E731
        lags.append((lag_of(before), status_lag, lag_of(after)))

    feeder = Feeder(run, events)
    gaps = CommitGaps(run.broker, run.app_id, run.topics)
    try:
        start("w1")
        settle("1")
        feeder.thread.start()
        gaps.thread.start()
        run.wait_processed("w1", workers["w1"][0], 300, 60)
        for r in range(rounds):
            second, third = f"w2.{r}", f"w3.{r}"
            for name in (second, third):  # scale out
                start(name)
                settle(f"+{name}")
                time.sleep(3)
                status_lag_matches_the_broker()
            proc, _ = workers.pop(third)  # scale in: a graceful leave
            assert stop_worker(proc) == 0, run.log_tail(third)
            settle(f"-{third} (SIGINT)")
            time.sleep(3)
            status_lag_matches_the_broker()
            proc, _ = workers.pop(second)  # and a kill: the survivor's group watch removes the member
            kill_worker(proc)
            settle(f"-{second} (SIGKILL)")
            time.sleep(3)
            status_lag_matches_the_broker()
        assert feeder.sent < len(events), "the feeder ran dry before the last step: data must flow throughout"
        feeder.finish()
        drained = run.drain(120)
        status_lag_matches_the_broker()
    finally:
        feeder.finish()
        gaps.stop.set()
        codes = {name: stop_worker(proc) for name, (proc, _) in workers.items()}
    gaps.thread.join(10)
    outcome = run.outcome(history)
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    print("rebalances settled:", ", ".join(settle_times), "| lag before/status/after:", lags)
    longest = max(gaps.longest.values(), default=0.0)
    print(f"longest time a partition with lag went without a commit: {longest:.1f} s")
    assert drained and codes == {"w1": 0}, run.log_tail("w1")
    assert gaps.longest and longest <= GAP_S, sorted(gaps.longest.items(), key=lambda kv: -kv[1])[:5]
    removed = "its process is gone and the broker kept it"
    w1_log = (run.work / "w1" / "worker.log").read_text(errors="replace")
    assert w1_log.count(removed) >= rounds, run.log_tail("w1")  # each killed member's removal is logged
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert figures.parked == 0, run.parked()[:3]
