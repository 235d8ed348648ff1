"""What each stage of the change verifier's compare costs per document (issue 28's cost goal).

    python -m benchmarks.verify_stages --events 20000 --runs 5 [--app desk]

The demo's history (``examples.activity_platform.generator``, the one ``benchmarks.verify_cost``
sends; ``--app desk``: the support desk's, ``--events`` tickets) goes through
``framework.testing.Driver`` (the worker's processing code, a SQLite store in
memory); the projection's documents are then copied into the embedded stack's index (noida-db).
Every document any entry names is then compared as ``ChangeVerifier`` compares it, a page of 500
at a time, each stage timed apart by ``time.process_time`` (this process, every thread; the index
server's CPU is not counted, as ``verify_cost`` does not count it in the worker's), the heap frozen
and the collector set as a worker's (``framework.worker.heap``):

- ``read``: the store's rows and version marks of the page (``read_shared_sources``);
- ``build``: the expected documents (``Projection.document``);
- ``index``: the copies (``SearchIndex.get_many``: noida-db for the projection, the store's
  contribution tables for the aggregates);
- ``compare``: ``classify`` of each pair;
- ``look``: the whole first look (``ChangeVerifier.first_look``), which is the four together;
- ``screen``: what the change verifier does instead for a changed document (issue 46,
  ``ChangeVerifier.screen`` at sample 0): the marks, the projector's records (the driver's
  projector wrote them) and the index's copies read, the copies digested and compared with the
  records.

Medians (min-max) over ``--runs`` passes, in CPU µs per document and per event (documents over
events); ``verify_cost``'s worker without the verifier is the scale (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate
from benchmarks.spark_runs import spread
from examples.activity_platform.app import app as platform_app
from examples.activity_platform.generator import generate_history as platform_history
from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history as desk_history
from framework import App
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.aggregate import Aggregate
from framework.core.projection import PartitionKey, Projection
from framework.local_stack import LocalStack
from framework.notifications.entries import Entry
from framework.notifications.reader import NotificationReader
from framework.runtime.projector import read_shared_sources
from framework.testing import Driver
from framework.verify import CONSUMER, ChangeVerifier
from framework.verify.changes import changed_documents
from framework.verify.compare import classify
from framework.worker.heap import freeze_startup_heap
from stores.base import IndexOp, SearchIndex
from stores.elasticsearch.index import ElasticsearchIndex

PAGE = 500
#: The example apps and their histories, by ``--app`` (the desk's ``--events`` counts tickets).
APPS: dict[str, tuple[App, Callable[[int, int], Any]]] = {
    "platform": (platform_app, platform_history),
    "desk": (desk_app, desk_history),
}
STAGES = ("read", "build", "index", "compare", "look", "screen")


async def one_pass(
    verifier: ChangeVerifier, work: list[tuple[Projection, list[PartitionKey]]]
) -> dict[str, float]:
    """CPU seconds of each stage over every page of ``work``."""
    spent = dict.fromkeys(STAGES, 0.0)

    async def timed(stage: str, run: Awaitable[Any]) -> Any:
        started = time.process_time()
        out = await run
        spent[stage] += time.process_time() - started
        return out

    for view, keys in work:
        target, versions = verifier.targets[view.name], not isinstance(view, Aggregate)
        for i in range(0, len(keys), PAGE):
            chunk = keys[i : i + PAGE]
            marks, rows = await timed("read", read_shared_sources(verifier.store, view, chunk))
            started = time.process_time()
            expected = [view.document(k, rows[j], marks[j]) for j, k in enumerate(chunk)]
            if not versions:
                expected = [(doc_id, doc or None, v) for doc_id, doc, v in expected]
            spent["build"] += time.process_time() - started
            ids = [doc[0] for doc in expected]
            found = await timed("index", target.get_many(view.alias, ids))
            started = time.process_time()
            for doc, hit in zip(expected, found, strict=True):
                assert classify(doc, hit, versions=versions) is None, (view.name, doc[0])
            spent["compare"] += time.process_time() - started
            differ = await timed("look", verifier.first_look([view], chunk))
            assert not differ, list(differ)[:3]
            rebuild, disagreed, unwritten = await timed("screen", verifier.screen([view], chunk))
            assert not rebuild and not disagreed and not unwritten, list(disagreed)[:3]
    return spent


async def measure(
    d: Driver, documents: dict[str, Any], entries: list[Entry], es_url: str, runs: int, work_dir: Path
) -> tuple[int, list[dict[str, float]]]:
    """The documents compared a pass and each pass's CPU seconds by stage; ``documents``: each
    projection's, by name (``Driver.documents``); ``entries``: ``Driver.notifications``."""
    index = ElasticsearchIndex.from_url(es_url, request_timeout=120.0)
    checkpoints = SqliteCheckpointStore(str(work_dir / "checkpoints.db"))
    try:
        targets: dict[str, SearchIndex] = {}
        for p in d.app.projections:
            await index.ensure_index(p.alias, p.mappings)
            docs = list(documents[p.name].items())
            for i in range(0, len(docs), 5000):
                ops = [IndexOp(doc_id, version, doc) for doc_id, (doc, version) in docs[i : i + 5000]]
                assert not (await index.bulk(p.alias, ops)).failed
            await index.refresh(p.alias)
            targets[p.name] = index
        targets.update({a.name: d.aggregates for a in d.app.aggregates})
        reader = NotificationReader(d.store, checkpoints, CONSUMER, settle=0)
        verifier = ChangeVerifier(d.app.views, d.store, targets, reader, sample=0.0)
        await verifier.ensure()
        changed = await changed_documents(entries, d.app.views, d.store)
        work = [(c.view, list(c.keys.values())) for c in changed]
        return sum(len(k) for _, k in work), [await one_pass(verifier, work) for _ in range(runs)]
    finally:
        await checkpoints.close()
        await index.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5, help="passes over every document")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--app", choices=sorted(APPS), default="platform", help="the example app (default: the demo's)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="converge-verify-stages-") as tmp:
        work_dir = Path(tmp)
        print(calibrate(work_dir / "calibration", 100_000), flush=True)
        app, generate_history = APPS[args.app]
        history = generate_history(args.seed, args.events)
        events = list(history.events)
        with Driver(app) as d:
            assert d.send(events) == []
            with LocalStack(work_dir / "stack") as stack:
                assert stack.info is not None
                documents = {p.name: d.documents(p) for p in app.projections}
                entries = d.notifications()
                freeze_startup_heap()  # the worker's collector setting (CONVERGE_GC=freeze)
                docs, passes = d.run(measure(d, documents, entries, stack.info.es_url, args.runs, work_dir))
    print(f"{len(events):,} events, {docs:,} documents compared a pass ({docs / len(events):.2f} a event), "
          f"{args.runs} passes; CPU µs, medians (min-max)")  # fmt: skip
    print("| stage | per document | per event |")
    print("|---|---:|---:|")
    for stage in STAGES:
        per_doc = [p[stage] / docs * 1e6 for p in passes]
        per_event = [p[stage] / len(events) * 1e6 for p in passes]
        print(f"| {stage} | {spread(per_doc)} | {spread(per_event)} |")
    parts = [sum(p[s] for s in STAGES[:4]) / docs * 1e6 for p in passes]
    print(f"(read + build + index + compare: {statistics.median(parts):.1f} µs per document)")


if __name__ == "__main__":
    main()
