"""SIGKILL the Spark ingestion job after each of its processes in turn; the next run repairs
exactly the lagging processes, and the end state is the oracle's.

The job runs as a real subprocess (``converge spark ingest``, Spark
``local[1]``) on the embedded stack, reading the reference app's history
from topics of the test's own in capped batches. The hidden flag
``--crash-after PROCESS@BATCH`` (``framework.testing.faults.kill_after``) makes it kill
itself right after that process recorded that batch:

    run 1: batch 1, killed after ``store``          -> notifications, index lag batch 1
    run 2: repairs them, batch 2, killed after ``notifications`` -> index lags batch 2
    run 3: repairs it, batch 3, killed after ``index`` -> nothing lags
    run 4: the remaining batches, to the end of every partition

Checked: after each kill, the checkpoint store names exactly the lagging
processes; each run's report repairs exactly those; the apply log shows every
process ran every batch exactly once (start and done); the store and the
index equal the oracle of the history; every row a batch changed is listed
once in that batch's notification entry of its tenant and table (or the
entry says re-read), and no batch has two entries for one tenant and table.
Both checkpoint backends: SQLite and the real ZooKeeper of the tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples.activity_platform.app import app as reference_app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.oracle import compare_documents, compare_rows, expected_state
from framework.coordination import open_checkpoint_store
from framework.core.events import parse_event
from framework.jobs.batches import Batch, BatchInput, JobCheckpoints, JobState
from framework.local_stack import StackInfo
from framework.notifications import DEFAULT_TENANT, NOTIFICATION_TABLE, default_tenant_of, entry_from_row
from framework.runtime.mapping import map_event
from spark_batch.kafka_ranges import read_range
from stores.open import open_wide_store
from tests.jobs.test_ingest import publish
from tests.spark.support import APP, HUB, LOG, TOMBSTONES, documents, read_state, sqlite_url, unique_alias
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROCESSES = ("store", "notifications", "index")
ROOT = Path(__file__).resolve().parents[2]
CAP = 12  # offsets per partition per batch


class Job:
    """One ingestion job's command line, checkpoints and outputs."""

    def __init__(self, tmp: Path, stack: StackInfo, topics: list[str], checkpoints: str) -> None:
        self.tmp, self.checkpoints = tmp, checkpoints
        self.name = f"faults-{uuid.uuid4().hex[:8]}"
        self.store, self.alias = sqlite_url(tmp / "wide.db"), unique_alias("activities")
        self.apply_log = tmp / "apply.jsonl"
        self.argv = [
            sys.executable, "-m", "framework.cli", "spark", "ingest", "--app", APP, "--job", self.name,
            "--checkpoints", checkpoints, "--broker", stack.kafka_bootstrap, "--wide-store", self.store,
            "--es-url", stack.es_url, "--es-tombstones", TOMBSTONES, "--alias", self.alias,
            "--master", "local[1]", "--max-offsets", str(CAP), "--split", "50",
            "--apply-log", str(self.apply_log), "--dlq-root", str(tmp / "dlq"), "--quiet",
            *[a for t in topics for a in ("--topic", t)],
        ]  # fmt: skip
        self.runs = 0

    def run(self, crash_after: str | None) -> tuple[int, dict[str, Any] | None]:
        self.runs += 1
        report = self.tmp / f"report-{self.runs}.json"
        env = {**os.environ, "CONVERGE_DATA_DIR": str(self.tmp / "var")}
        crash = ["--crash-after", crash_after] if crash_after else []
        done = subprocess.run(
            [*self.argv, "--report", str(report), *crash],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(
                f"job exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
            )
        return done.returncode, json.loads(report.read_text()) if report.exists() else None

    def state(self) -> JobState:
        async def read() -> JobState:
            store = open_checkpoint_store(self.checkpoints)
            try:
                return await JobCheckpoints(store, self.name, PROCESSES).state()
            finally:
                await store.close()

        return asyncio.run(read())

    def log(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.apply_log.read_text().splitlines()]


def _tenant_of(table: str, key: dict[str, Any]) -> str:
    conf = getattr(reference_app, "notifications", None)
    rule = (conf.tenant_of if conf is not None else None) or default_tenant_of
    tenant = rule(table, key)
    return DEFAULT_TENANT if tenant is None else str(tenant)


async def _batch_rows(broker: str, state_ranges: list[Any]) -> dict[tuple[str, str], set[str]]:
    """The (tenant, table) -> row keys the events of one batch's ranges write, as the app maps them."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in state_ranges:
        async for page in read_range(broker, r):
            for _, _, _, _, value in page:
                event = parse_event(value)
                agent = reference_app.route(event)
                for m in map_event(agent, event, reference_app.views_of(agent)):
                    key = dict(m.key)
                    if hasattr(m, "at") and hasattr(m, "event_id"):
                        key.update(at=m.at, event_id=m.event_id)
                    tenant = _tenant_of(m.table, key)
                    out.setdefault((tenant, m.table), set()).add(json.dumps(key, sort_keys=True, default=str))
    return out


async def _entries(url: str) -> list[Any]:
    store = await open_wide_store(url)
    try:
        return [entry_from_row(r) async for r in store.scan(NOTIFICATION_TABLE.name)]
    finally:
        await store.close()


#: each run's crash point, then every (batch -> processes) repaired so far
EVERY_PROCESS = [
    ("store@1", {}),
    ("notifications@2", {1: ["notifications", "index"]}),
    ("index@3", {1: ["notifications", "index"], 2: ["index"]}),
]
ONE_KILL = [("notifications@1", {})]


@pytest.fixture(params=[("sqlite", EVERY_PROCESS), ("zookeeper", ONE_KILL)], ids=["sqlite", "zookeeper"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, list[Any]]:
    """The checkpoint store URL and the kills. The long fault suite (``--faults-long``) kills after
    every process on SQLite (the embedded default) and once on ZooKeeper; the default suite kills
    once on SQLite (two Spark runs instead of six; the checkpoint contract suite runs on the real
    ZooKeeper every time, and tests/jobs/test_micro_batch.py kills a job after each process)."""
    kind, plan = request.param
    long = request.config.getoption("--faults-long") or os.environ.get("CONVERGE_FAULTS_LONG") == "1"
    if kind == "zookeeper" and not long:
        pytest.skip("the ZooKeeper variant runs in the long fault suite (--faults-long)")
    if kind == "sqlite" and not long:
        plan = ONE_KILL
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}", plan
    server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
    return f"zookeeper://{server.hosts}/converge-faults/{uuid.uuid4().hex[:8]}", plan


def test_sigkill_after_each_process_is_repaired_exactly_and_ends_in_the_oracle_state(
    stack: StackInfo, tmp_path: Path, backend: tuple[str, list[Any]]
) -> None:
    checkpoints_url, plan = backend
    history = generate_history(23, 240)
    uid = uuid.uuid4().hex[:8]
    names = {t: f"{uid}-{t}" for t in history.by_topic()}
    produced = publish(f"kafka://{stack.kafka_bootstrap}", history.by_topic(), names)
    job = Job(tmp_path, stack, sorted(names.values()), checkpoints_url)

    for crash, repaired_so_far in plan:
        code, report = job.run(crash)
        assert code == -signal.SIGKILL and report is None
        process, batch = crash.split("@")
        state = job.state()
        assert state.batch is not None and state.batch.batch_id == int(batch)
        assert state.lagging() == PROCESSES[PROCESSES.index(process) + 1 :]
        repaired: dict[int, list[str]] = {}
        for e in job.log():
            if e["phase"] == "done" and e["repair"]:
                repaired.setdefault(e["batch_id"], []).append(e["process"])
        assert repaired == repaired_so_far

    code, report = job.run(None)
    assert code == 0 and report is not None
    last_kill, last_batch = plan[-1][0].split("@")
    lagging = list(PROCESSES[PROCESSES.index(last_kill) + 1 :])
    assert report["repaired"] == ({last_batch: lagging} if lagging else {})
    assert report["batches"][0] == int(last_batch) + 1
    state = job.state()
    assert state.complete and state.batch is not None
    ends = {(r.topic, r.partition): r.end for r in state.batch.input.ranges}
    assert sum(ends.values()) == sum(produced.values())  # read to the end of every partition
    last = state.batch.batch_id
    assert last >= int(last_batch) + 1

    # every process ran every batch exactly once
    log = job.log()
    for phase in ("start", "done"):
        counted = Counter((e["process"], e["batch_id"]) for e in log if e["phase"] == phase)
        assert counted == {(p, b): 1 for p in PROCESSES for b in range(1, last + 1)}, phase

    # the store and the index hold the oracle's state
    expected = expected_state(history.truth)
    hubs, logs = asyncio.run(read_state(job.store))
    assert compare_rows(HUB, expected.hub_rows, hubs) == []
    assert compare_rows(LOG, expected.engagement_logs, logs) == []
    assert compare_documents(expected.documents, asyncio.run(documents(stack.es_url, job.alias))) == []

    # notifications: one entry per batch, tenant and table, listing every row the batch changed
    entries = asyncio.run(_entries(job.store))
    per_batch = Counter((e.batch_id, e.tenant, e.table) for e in entries)
    assert per_batch and max(per_batch.values()) == 1
    assert {e.batch_id for e in entries} == {f"{job.name}/{b}" for b in range(1, last + 1)}
    by_id = {(e.batch_id, e.tenant, e.table): e for e in entries}
    for b in _batches(job, last):
        rows = asyncio.run(_batch_rows(stack.kafka_bootstrap, list(b.input.ranges)))
        for (tenant, table), keys in rows.items():
            entry = by_id[(f"{job.name}/{b.batch_id}", tenant, table)]
            if entry.reread:
                continue
            listed = {json.dumps(k, sort_keys=True, default=str) for k in entry.keys or ()}
            assert listed == keys, (b.batch_id, tenant, table)


def _batches(job: Job, last: int) -> list[Batch]:
    """Every batch as the apply log recorded it when a process started it."""
    found = {e["batch_id"]: Batch(e["batch_id"], BatchInput.from_json(e["input"]), e["began_at"])
             for e in job.log() if e["phase"] == "start"}  # fmt: skip
    assert sorted(found) == list(range(1, last + 1))
    return [found[b] for b in sorted(found)]
