"""The end-to-end pair of issue 44: the demo's pipeline against a Quix Streams app, the same events,
from the first event produced to the last document searchable.

    python -m benchmarks.e2e_peer --history 80000 --rounds 5

The events: the activity events (``activity-events``: emails and meetings created, updated,
rescheduled, cancelled; duplicates, replays and out-of-order arrival included) of the demo's
generated history (``generate_history(seed, --history)``), produced to noida-db as the demo
produces them (4 partitions, keyed by ``<org_id>:<hub_id>``, chunks of 10,000). The insight and
engagement events are left out: the Quix side would have to re-implement the whole platform.

- converge: the demo's pipeline as ``converge demo`` runs it (``examples.demo``'s app, settings
  and environment, the SQLite store, ``--workers`` worker processes of one group, 2 by default as
  the demo): the activities agent writes the hub rows and the projector writes each hub row's
  document to the index (alias ``activities``, tombstones as marker documents). The demo's app
  also keeps the owner rows, its aggregates and the change feed: work the Quix side does not do.
- Quix: ``benchmarks/quix_e2e_app.py`` in the scratch venv (``QUIX_E2E_REQUIREMENT``: quixstreams
  with its ``elasticsearch`` extra; never a converge dependency), as many processes of one
  group: the same hub-row state in RocksDB and the same documents (converge's tombstone marker
  for a row with no live cell) written by quixstreams' ``ElasticsearchSink`` to the same
  noida-db Elasticsearch API (index ``activities``, the projection's mappings).

Each run has a fresh noida-db (``LocalStack``); its processes join their group before the clock
starts. The clock runs from the first produce to the refresh after which the index holds exactly
the model's documents: every ``--poll`` s the index is refreshed and its visible documents
counted; when the count is the model's, every document is read (a scan) and compared with the
model; the run ends at the start of the first poll whose documents equal it (a run that never
gets there within ``--timeout`` fails the benchmark, as does an empty model). CPU: user + system
seconds from ``/proc`` of the worker processes (with their descendants) and of noida-db, over
the same interval, divided by the events produced. Rounds are interleaved (the order of the
sides alternates), the calibration line comes first, medians with ranges at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch, NotFoundError

from agents import INDEX_ALIAS, INDEX_MAPPINGS, TOPIC_ACTIVITIES
from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_seconds, load_average, tree_cpu_seconds
from benchmarks.quix_peer import QUIX_VENV, scratch_venv
from examples.activity_platform.generator import generate_history
from examples.demo import APP_ID, PARTITIONS, SETTLE_TIMEOUT, SPEC, app
from framework.core.events import Event
from framework.kafka_admin import ensure_topics, produce, wait_group_settled
from framework.local_s3 import dlq_env
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_workers
from stores.elasticsearch.index import TOMBSTONE_FIELD, ElasticsearchIndex

#: quixstreams with the extra its Elasticsearch sink needs (the elasticsearch client).
QUIX_E2E_REQUIREMENT = "quixstreams[elasticsearch]==3.28.*"
QUIX_E2E_APP = Path(__file__).with_name("quix_e2e_app.py")
#: The Quix side's index: the projection's mappings and converge's tombstone marker field.
QUIX_INDEX = "activities"
_STATUS = {"email.created": "sent", "meeting.created": "scheduled", "meeting.rescheduled": "rescheduled"}
_VISIBLE = {"bool": {"must_not": [{"term": {TOMBSTONE_FIELD: True}}]}}

Docs = dict[str, dict[str, Any]]


def activity_events(seed: int, history: int) -> list[Event]:
    """The activity events of the demo's history of ``history`` events, in their arrival order."""
    return generate_history(seed, history).by_topic()[TOPIC_ACTIVITIES]


def expected_documents(events: Sequence[Event]) -> Docs:
    """The model: per hub row, its document once every event is applied, by plain loops over each
    row's events in version order. A cell's value is the one of the latest event writing it; a
    cell is live when that event is newer than the row's latest cancellation and its value is
    set; a row without a live cell has no document."""
    by_hub: dict[str, dict[str, Event]] = {}
    for e in events:  # a duplicate or replay is the same event: one of each event id
        by_hub.setdefault(e.ordering_key.rsplit(":", 1)[1], {})[e.event_id] = e
    out: Docs = {}
    for hub, evs in by_hub.items():
        ordered = sorted(evs.values(), key=lambda e: e.version)
        cancelled = max((e.version for e in ordered if e.type == "meeting.cancelled"), default=-1)
        cells: dict[str, Any] = {}
        for e in ordered:
            if e.type == "meeting.cancelled" or e.version <= cancelled:
                continue
            p = e.payload
            cells.update(org_id=p["org_id"], source=p["source"], external_id=p["external_id"])
            cells["kind"] = e.type.split(".")[0]
            cells.update({k: p[k] for k in ("subject", "body_preview", "starts_at", "ends_at") if k in p})
            if "participants" in p:
                cells["participants"] = sorted({a.lower() for a in p["participants"]})
            if "sent_at" in p:
                cells["starts_at"] = p["sent_at"]
            if e.type in _STATUS:
                cells["status"] = _STATUS[e.type]
        if cells:
            out[hub] = {"hub_id": hub, **cells, "has_record": "kind" in cells}
    return out


def quix_e2e_venv(venv: Path = QUIX_VENV) -> Path:
    """The scratch venv's interpreter (``quix_peer.scratch_venv``) with ``QUIX_E2E_REQUIREMENT``."""
    python = scratch_venv(venv)
    probe = [str(python), "-c", "import quixstreams.sinks.community.elasticsearch"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", QUIX_E2E_REQUIREMENT], check=True)
    return python


@dataclass(frozen=True)
class Run:
    """One side's run: events produced, seconds to the last document searchable, CPU seconds of its
    worker processes and of noida-db over that interval, and the load at its end."""

    side: str
    events: int
    seconds: float
    worker_cpu_s: float
    broker_cpu_s: float
    documents: int
    load: float
    #: CPU seconds a second of the worker processes and of noida-db, idle, just before the clock
    idle_worker: float = 0.0
    idle_broker: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def worker_us(self) -> float:
        return self.worker_cpu_s / self.events * 1e6

    @property
    def broker_us(self) -> float:
        return self.broker_cpu_s / self.events * 1e6


def _visible_count(es: Elasticsearch, index: str) -> int:
    try:
        es.indices.refresh(index=index)
        return int(es.count(index=index, query=_VISIBLE)["count"])
    except NotFoundError:  # the side has not made its index yet
        return 0


async def _documents(es_url: str, index: str) -> Docs:
    reader = ElasticsearchIndex.from_url(es_url, tombstones="document")
    try:
        await reader.refresh(index)
        return {h.doc_id: dict(h.source) async for h in reader.scan(index)}
    finally:
        await reader.close()


def _difference(model: Docs, docs: Docs) -> str:
    wrong = sorted(k for k in model.keys() | docs.keys() if model.get(k) != docs.get(k))
    sample = [(k, docs.get(k), model.get(k)) for k in wrong[:2]]
    return f"{len(wrong)} of {len(model)} documents differ, e.g. (id, indexed, model): {sample}"


def until_searchable(
    es_url: str, index: str, model: Docs, timeout: float, poll: float, dead: Callable[[], str | None]
) -> float:
    """The ``perf_counter`` at the start of the first poll after which ``index`` holds exactly the
    ``model``'s documents; RuntimeError after ``timeout`` s or once ``dead()`` names a process gone."""
    deadline = time.perf_counter() + timeout
    docs: Docs = {}
    with Elasticsearch(es_url) as es:
        while True:
            started = time.perf_counter()
            if _visible_count(es, index) == len(model):
                docs = asyncio.run(_documents(es_url, index))
                if docs == model:
                    return started
            gone = dead()
            if started > deadline or gone:
                docs = docs or asyncio.run(_documents(es_url, index))
                why = gone or f"not the model's after {timeout:.0f} s"
                raise RuntimeError(f"{index}: {why}: {_difference(model, docs)}")
            time.sleep(poll)


def _dead(procs: Sequence[subprocess.Popen[bytes]], logs: Path) -> Callable[[], str | None]:
    def dead() -> str | None:
        codes = [p.poll() for p in procs]
        return None if all(c is None for c in codes) else f"a process exited ({codes}; logs in {logs})"

    return dead


def _measure(side: str, stack: LocalStack, procs: Sequence[subprocess.Popen[bytes]], work: Path,
             records: list[tuple[bytes, bytes]], index: str, model: Docs,
             args: argparse.Namespace) -> Run:  # fmt: skip
    assert stack.info is not None
    broker, broker_pid, pids = f"kafka://{stack.info.kafka_bootstrap}", stack.info.pid, [p.pid for p in procs]

    def worker_cpu() -> float:
        return sum(tree_cpu_seconds(p) for p in pids)

    idle0, idle_noida0 = worker_cpu(), cpu_seconds(broker_pid)
    time.sleep(args.idle)
    cpu0, noida0, t0 = worker_cpu(), cpu_seconds(broker_pid), time.perf_counter()
    for i in range(0, len(records), 10_000):
        asyncio.run(produce(broker, TOPIC_ACTIVITIES, records[i : i + 10_000]))
    t1 = until_searchable(stack.info.es_url, index, model, args.timeout, args.poll, _dead(procs, work))
    cpu1, noida1 = worker_cpu(), cpu_seconds(broker_pid)
    idle = ((cpu0 - idle0) / args.idle, (noida0 - idle_noida0) / args.idle) if args.idle else (0.0, 0.0)
    return Run(side, len(records), t1 - t0, cpu1 - cpu0, noida1 - noida0, len(model), load_average(), *idle)


def converge_run(
    records: list[tuple[bytes, bytes]], model: Docs, work: Path, args: argparse.Namespace
) -> Run:
    """The demo's pipeline (its app, settings and environment) over ``records``."""
    with LocalStack(work / "stack", s3=True) as stack:
        assert stack.info is not None and stack.info.s3_endpoint is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {t: PARTITIONS for t in app.topics()}))
        env = {"CONVERGE_WIDE_STORE": f"sqlite:///{work / 'wide.db'}", "CONVERGE_ES_URL": stack.info.es_url,
               "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": APP_ID,
               "CONVERGE_PARTITIONS": str(PARTITIONS), "CONVERGE_DENYLIST_STORE": stack.info.denylist_store,
               **dlq_env(stack.info.s3_endpoint, APP_ID)}  # fmt: skip
        procs = [start_worker(SPEC, work / f"worker{i}", broker, env) for i in range(args.workers)]
        try:
            asyncio.run(wait_group_settled(broker, APP_ID, args.workers, SETTLE_TIMEOUT))
            return _measure("converge", stack, procs, work, records, INDEX_ALIAS, model, args)
        finally:
            codes = stop_workers(procs)
            if any(codes):
                print(f"converge workers exited with {codes}; logs under {work}", flush=True)


def quix_run(python: Path, records: list[tuple[bytes, bytes]], model: Docs, work: Path,
             args: argparse.Namespace, commit_interval: float) -> Run:  # fmt: skip
    """``--workers`` processes of ``quix_e2e_app.py`` (one group, checkpoints every
    ``commit_interval`` s) over ``records``."""
    mappings = {**INDEX_MAPPINGS, "properties": {**INDEX_MAPPINGS["properties"],
                                                 TOMBSTONE_FIELD: {"type": "boolean"}}}  # fmt: skip
    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {TOPIC_ACTIVITIES: PARTITIONS}))
        group = f"bench-quix-e2e-{uuid.uuid4().hex[:6]}"
        procs: list[subprocess.Popen[bytes]] = []
        for i in range(args.workers):
            cmd = [str(python), str(QUIX_E2E_APP), "--broker", stack.info.kafka_bootstrap,
                   "--topic", TOPIC_ACTIVITIES, "--group", group, "--state-dir", str(work / f"state{i}"),
                   "--es-url", stack.info.es_url, "--index", QUIX_INDEX, "--mappings", json.dumps(mappings),
                   "--commit-interval", str(commit_interval)]  # fmt: skip
            with open(work / f"quix{i}.log", "wb") as log:
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        try:
            try:
                asyncio.run(wait_group_settled(broker, group, args.workers, SETTLE_TIMEOUT))
            except TimeoutError as e:
                tail = (work / "quix0.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the Quix app's group did not settle: {e}\n{tail}") from e
            return _measure(
                f"quix {commit_interval:g} s", stack, procs, work, records, QUIX_INDEX, model, args
            )
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _median(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def _line(r: Run) -> str:
    return (f"{r.side:10} {r.rate:>8,.0f} ev/s  {r.seconds:6.2f} s  workers {r.worker_us:6.1f} µs/ev  "
            f"noida-db {r.broker_us:6.1f} µs/ev  load {r.load:.2f}  idle CPU s/s: workers "
            f"{r.idle_worker:.2f}, noida-db {r.idle_broker:.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history", type=int, default=80_000, help="events of the demo's history (its "
                    "activity events are produced: about 44 %%)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each one run of each side")
    ap.add_argument("--workers", type=int, default=2, help="processes of each side (the demo's 2)")
    ap.add_argument("--quix-commit-intervals", type=float, nargs="+", default=[5.0, 1.0],
                    help="Quix's checkpoint interval, s, one Quix side each (its default 5; the sink "
                    "flushes at each checkpoint)")  # fmt: skip
    ap.add_argument("--quix-venv", type=Path, default=QUIX_VENV)
    ap.add_argument("--idle", type=float, default=2.0, help="s of idle CPU sampled before each run")
    ap.add_argument("--poll", type=float, default=0.1, help="s between the index's polls")
    ap.add_argument("--timeout", type=float, default=300.0, help="s a run may take to converge")
    ap.add_argument("--calibration-records", type=int, default=200_000, help="0: no calibration line")
    args = ap.parse_args()
    if args.calibration_records:
        with tempfile.TemporaryDirectory(prefix="converge-calibration-") as cal:
            print(calibrate(Path(cal), args.calibration_records), flush=True)
    python = quix_e2e_venv(args.quix_venv)
    events = activity_events(args.seed, args.history)
    records = [(e.ordering_key.encode(), e.to_json()) for e in events]
    model = expected_documents(events)
    if not model:
        raise SystemExit("the model holds no document: nothing would be measured")
    version = subprocess.run([str(python), "-c", "import quixstreams; print(quixstreams.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    print(f"{len(records):,} activity events of the demo's history of {args.history:,} (seed {args.seed}), "
          f"{len({e.event_id for e in events}):,} distinct; {len(model):,} documents in the model; "
          f"{args.workers} process(es) a side, {PARTITIONS} partitions; Quix Streams {version}",
          flush=True)  # fmt: skip
    sides: dict[str, Callable[[Path], Run]] = {"converge": lambda w: converge_run(records, model, w, args)}
    for interval in args.quix_commit_intervals:
        sides[f"quix {interval:g} s"] = functools.partial(quix_run, python, records, model, args=args,
                                                          commit_interval=interval)  # fmt: skip
    runs: dict[str, list[Run]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="converge-e2e-") as tmp:
        for i in range(args.rounds):
            order = list(sides)[i % len(sides) :] + list(sides)[: i % len(sides)]  # who goes first rotates
            for j, name in enumerate(order):
                work = Path(tmp) / f"round{i}-{j}"
                work.mkdir()
                runs[name].append(sides[name](work))
            c = runs["converge"][-1]
            print(f"round {i + 1}:", flush=True)
            for name in sides:
                q = runs[name][-1]
                vs = "" if q is c else f"; converge/this: events/s {c.rate / q.rate:.2f}, "
                vs += "" if q is c else f"worker CPU per event {c.worker_us / q.worker_us:.2f}"
                print(f"  {_line(q)}{vs}", flush=True)
    print(f"\n{args.rounds} rounds, interleaved; medians (ranges); every run's index equalled the model")
    for name, rs in runs.items():
        print(f"{name:10} {_median([r.rate for r in rs])} ev/s, {_median([r.seconds for r in rs], '.2f')} s, "
              f"workers {_median([r.worker_us for r in rs], '.1f')} µs/ev, "
              f"noida-db {_median([r.broker_us for r in rs], '.1f')} µs/ev, "
              f"load {_median([r.load for r in rs], '.1f')}")  # fmt: skip
    for name, rs in runs.items():
        if name != "converge":
            ratios = [c.rate / q.rate for c, q in zip(runs["converge"], rs, strict=True)]
            print(f"converge/{name} events/s per round: " + " ".join(f"{x:.2f}" for x in ratios))
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
