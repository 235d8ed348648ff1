"""The demo: the reference platform on the embedded stack, checked against the oracle.

Starts noida-db and the embedded S3 server, runs the reference agents and the
indexer in ``workers`` worker processes of one consumer group (two by default,
one per core of a 2-core machine) that upload sealed dead-letter segments to
``s3://converge-dlq/<app id>``, waits for the group to settle, produces a
generated history (duplicates, replays, out-of-order arrival), waits for the
group to drain every topic, compares the wide-column store, the search index
and the aggregates' totals with the oracle, counts the parked events left on the
workers' disks and the segment objects in the bucket, prints a summary and the
aggregates beside the oracle's figures (``demo_aggregates``; also drawn into a
PNG when asked) and stops everything. Exit code
1 on any divergence or parked event.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agents import INDEX_ALIAS, TOPIC_ACTIVITIES, TOPIC_ENGAGEMENT, TOPIC_INSIGHTS, current_engagement
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import (
    Divergence,
    Totals,
    compare_documents,
    compare_engagement,
    compare_rows,
    expected_state,
    expected_totals,
    hit_document,
    row_cells,
)
from examples.demo_aggregates import draw_chart, figures_table
from framework.aggregates.tables import decode_measures, tables_of
from framework.core.aggregate import group_id, parse_series
from framework.dlq import DeadLetterStore
from framework.kafka_admin import ensure_topics, produce, wait_all_drained, wait_group_settled
from framework.local_s3 import ACCESS_KEY, DLQ_BUCKET, dlq_env
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_workers
from stores.elasticsearch.index import ElasticsearchIndex
from stores.objects.store import ObjectStore
from stores.open import open_wide_store

__all__ = ["run_demo", "DemoResult", "Convergence", "check_convergence", "count_segment_objects"]

INPUT_TOPICS = (TOPIC_ACTIVITIES, TOPIC_ENGAGEMENT, TOPIC_INSIGHTS)
PARTITIONS = 4
APP_ID = app.name
SPEC = "examples.activity_platform.app:app"
SETTLE_TIMEOUT = 120.0


@dataclass
class DemoResult:
    """What the demo measured."""

    events: int = 0
    workers: int = 1
    distinct: int = 0
    duplicates_absorbed: int = 0
    seconds: float = 0.0
    parked: int = 0
    segment_objects: int = 0
    hub_rows: int = 0
    documents: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


@dataclass
class Convergence:
    """The stored state against the oracle: the divergences, the hub rows and index documents
    counted, and the aggregates' totals as stored and as the oracle recomputes them."""

    divergences: list[Divergence]
    hub_rows: int
    documents: int
    totals: Totals
    expected_totals: Totals


async def check_convergence(history: History, wide_store_url: str, es_url: str) -> Convergence:
    """The stored state (wide-column store and index) checked against the oracle."""
    expected = expected_state(history.truth)
    store = await open_wide_store(wide_store_url)
    index = ElasticsearchIndex.from_url(es_url, tombstones="document")
    try:
        rows = {}
        async for row in store.scan(ACTIVITY_HUB.name):
            rows[str(row.key["hub_id"])] = row_cells(row)
        logs = {}
        by_hub: dict[str, list] = {}
        async for row in store.scan(ENGAGEMENT_LOG.name):
            hub = str(row.key["hub_id"])
            logs[(hub, int(row.key["at"]), str(row.key["event_id"]))] = row_cells(row)  # type: ignore[arg-type]
            by_hub.setdefault(hub, []).append(row)
        engagement = {}
        for hub, log_rows in by_hub.items():
            e = current_engagement(log_rows)
            if e is not None:
                engagement[hub] = (e.state, e.version)
        await index.refresh(INDEX_ALIAS)
        docs = {h.doc_id: hit_document(h) async for h in index.scan(INDEX_ALIAS)}
        totals = await read_totals(store)
    finally:
        await store.close()
        await index.close()
    want = expected_totals(history.truth, history.events)
    divergences = (
        compare_rows(ACTIVITY_HUB.name, expected.hub_rows, rows)
        + compare_rows(ENGAGEMENT_LOG.name, expected.engagement_logs, logs)
        + compare_engagement(expected.engagement, engagement)
        + compare_documents(expected.documents, docs)
        + compare_totals(want, totals)
    )
    return Convergence(divergences, len(rows), len(docs), totals, want)


async def read_totals(store: Any) -> Totals:
    """Every group total the app's aggregates hold in ``store``, by aggregate and group id."""
    out: Totals = {}
    for a in app.aggregates:
        groups = out.setdefault(a.name, {})
        async for row in store.scan(tables_of(a).totals.name):
            if row.cells.get("measures") is None:
                continue  # a window emptied after it was final: its revision count only
            series = parse_series(str(row.key["series"]))
            groups[group_id(series, int(str(row.key["window"])))] = decode_measures(
                row.cells["measures"].value
            )
    return out


def compare_totals(expected: Totals, actual: Totals) -> list[Divergence]:
    """Differences between the oracle's totals and the stored ones, one per group."""
    out = []
    for name in sorted(set(expected) | set(actual)):
        want, got = expected.get(name, {}), actual.get(name, {})
        for gid in sorted(set(want) | set(got)):
            if want.get(gid) != got.get(gid):
                out.append(Divergence(f"{name}_totals", gid, None, want.get(gid), got.get(gid)))
    return out


def count_segment_objects(endpoint: str, prefix: str = APP_ID) -> int:
    """The dead-letter segment objects under ``segments/`` in ``s3://converge-dlq/<prefix>``."""
    objects = ObjectStore(
        f"s3://{DLQ_BUCKET}/{prefix}", endpoint=endpoint, access_key=ACCESS_KEY, secret_key=ACCESS_KEY
    )
    try:
        return sum(1 for _ in objects.list("segments/"))
    finally:
        objects.close()


@contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="converge-demo-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_demo(
    events: int = 50_000,
    seed: int = 7,
    wide_store: str = "sqlite",
    workdir: Path | None = None,
    console: Console | None = None,
    drain_timeout: float = 900.0,
    workers: int = 2,
    chart: Path | None = None,
) -> int:
    """Run the demo end to end; returns the process exit code (0 = converged). ``chart``: where
    to draw the aggregates' chart (PNG; none when None).

    The clock runs from the first produced event to the last committed offset; the workers
    join before it starts (noida-db answers commits sent during a rebalance with
    IllegalGeneration, so members joining mid-stream can stall the group for a while)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    console = console or Console()
    result = DemoResult(workers=workers)
    with _workdir(workdir) as work, LocalStack(work / "stack", s3=True) as stack:
        assert stack.info is not None and stack.info.s3_endpoint is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        store_url = f"sqlite:///{work / 'wide.db'}" if wide_store == "sqlite" else wide_store
        console.print(
            f"[bold]converge demo[/]: kafka {stack.info.kafka_bootstrap}, es {stack.info.es_url}, "
            f"parked segments to s3://{DLQ_BUCKET}/{APP_ID} on {stack.info.s3_endpoint} (in memory)"
        )
        history = generate_history(seed, events)
        result.events, result.distinct = len(history.events), history.stats.distinct
        result.duplicates_absorbed = history.stats.duplicates + history.stats.replayed
        topics = tuple(app.topics())
        asyncio.run(ensure_topics(broker, {t: PARTITIONS for t in topics}))
        env = {"CONVERGE_WIDE_STORE": store_url, "CONVERGE_ES_URL": stack.info.es_url,
               "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": APP_ID,
               "CONVERGE_PARTITIONS": str(PARTITIONS), "CONVERGE_DENYLIST_STORE": stack.info.denylist_store,
               **dlq_env(stack.info.s3_endpoint, APP_ID)}  # fmt: skip
        procs = [start_worker(SPEC, work / f"worker{i}", broker, env) for i in range(workers)]
        try:
            try:
                asyncio.run(wait_group_settled(broker, APP_ID, workers, SETTLE_TIMEOUT))
            except TimeoutError as e:
                console.print(f"[red]{e}[/]")
                for i, proc in enumerate(procs):
                    state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
                    console.print(f"worker {i}: {state}; log: {work / f'worker{i}' / 'worker.log'}")
                return 2
            started = time.perf_counter()
            by_topic = history.by_topic()
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("producing", total=len(history.events))
                for topic, evs in by_topic.items():
                    for i in range(0, len(evs), 10_000):
                        chunk = evs[i : i + 10_000]
                        records = [(e.ordering_key.encode(), e.to_json()) for e in chunk]
                        asyncio.run(produce(broker, topic, records))
                        progress.advance(task, len(chunk))
                progress.add_task("draining", total=None)
                if not asyncio.run(wait_all_drained(broker, APP_ID, topics, drain_timeout, poll=0.2)):
                    console.print(f"[red]timed out draining {', '.join(topics)}[/]")
                    return 2
            result.seconds = time.perf_counter() - started
        finally:
            codes = stop_workers(procs)
        for i, code in enumerate(codes):
            if code != 0:
                log = work / f"worker{i}" / "worker.log"
                console.print(f"[red]worker {i} exited with {code}; log: {log}[/]")
        result.parked = sum(
            1 for i in range(workers) for _ in DeadLetterStore(work / f"worker{i}" / "dlq").ordered()
        )
        result.segment_objects = count_segment_objects(stack.info.s3_endpoint)
        checked = asyncio.run(check_convergence(history, store_url, stack.info.es_url))
        result.divergences = checked.divergences
        result.hub_rows, result.documents = checked.hub_rows, checked.documents
    _report(console, result, history, checked)
    if chart is not None:
        console.print(f"aggregates chart: {draw_chart(checked.totals, checked.expected_totals, chart)}")
    return 0 if not result.divergences and result.parked == result.segment_objects == 0 else 1


def _report(console: Console, r: DemoResult, history: History, checked: Convergence) -> None:
    t = Table(title="converge demo", show_header=False)
    for name, value in (
        ("events produced", f"{r.events:,}"),
        ("worker processes", f"{r.workers}"),
        ("distinct events", f"{r.distinct:,}"),
        ("duplicates and replays absorbed", f"{r.duplicates_absorbed:,}"),
        ("out-of-order first deliveries", f"{history.stats.out_of_order:,}"),
        ("hub rows / index documents", f"{r.hub_rows:,} / {r.documents:,}"),
        ("parked events", f"{r.parked:,}"),
        ("segment objects in the bucket", f"{r.segment_objects:,}"),
        ("end-to-end time", f"{r.seconds:.1f} s"),
        ("throughput (produce to drained)", f"{r.throughput:,.0f} events/s"),
        ("divergent entities", f"{len({d.key for d in r.divergences}):,}"),
    ):
        t.add_row(name, value)
    console.print(t)
    console.print(figures_table(checked.totals, checked.expected_totals))
    for d in r.divergences[:20]:
        console.print(f"  [red]{d}[/]")
    if not os.environ.get("CI"):
        console.print("[green]converged[/]" if not r.divergences else "[red]diverged[/]")
