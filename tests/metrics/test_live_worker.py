"""A live support-desk worker's metrics against what it was given to process.

Real parts: a noida-db of its own (``fresh_stack``: the app's topics hold only
this test's events), a ``converge worker`` subprocess with its web server on a
free loopback port, a SQLite store, the dead-letter WAL. The test produces a
generated history plus one unparseable message, scrapes ``/metrics`` until the
committed offsets reach the produced counts, checks every figure, runs
``converge status`` against the worker, and compares the parked labels with
the WAL's record.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.cli import main
from framework.dlq import DeadLetterStore
from framework.kafka_admin import end_offsets, ensure_topics, produce
from framework.local_stack import LocalStack, free_port
from framework.metrics.summary import fetch_metrics
from framework.worker.processes import start_worker, stop_worker
from tests.metrics import dashboard

SEED = 13
BAD = b'{"event_id": "half-a-message"'  # not JSON: parked at stage parse
Samples = dict[str, list[tuple[dict[str, str], float]]]


def _samples(text: str) -> Samples:
    out: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name].append((s.labels, s.value))
    return out


def _sum(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for lb, v in samples.get(name, []) if all(lb.get(k) == x for k, x in labels.items()))


def _one(samples: Samples, name: str, **labels: str) -> float:
    found = [v for lb, v in samples.get(name, []) if all(lb.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


async def _produce(broker: str, events: dict[str, list]) -> dict[str, int]:  # type: ignore[type-arg]
    """The bad message first, under the key of a real ticket, then the history topic by topic;
    returns how many messages each topic got."""
    key = events["support.tickets"][0].ordering_key.encode()
    counts = {"support.tickets": await produce(broker, "support.tickets", [(key, BAD)])}
    for topic, evs in events.items():
        counts[topic] = counts.get(topic, 0) + await produce(
            broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs]
        )
    return counts


def _settled(samples: Samples, produced: dict[str, int], changes: str) -> bool:
    committed = _sum(samples, "converge_partition_committed_offset", topic=changes)
    return (
        all(_sum(samples, "converge_partition_committed_offset", topic=t) == n for t, n in produced.items())
        and committed > 0
        and committed == _sum(samples, "converge_partition_end_offset", topic=changes)
        and _sum(samples, "converge_parked_events") == 1
    )


def _scrape_until_settled(url: str, produced: dict[str, int], changes: str, log: Path) -> Samples:
    deadline, samples, error = time.monotonic() + 150, Samples(), ""
    while time.monotonic() < deadline:
        try:
            samples = _samples(fetch_metrics(url, timeout=5))
        except OSError as exc:  # the web server is not up yet
            error = repr(exc)
        else:
            if _settled(samples, produced, changes):
                return samples
        time.sleep(0.5)
    committed = [(lb, v) for lb, v in samples.get("converge_partition_committed_offset", [])]
    raise AssertionError(f"not settled: {error} {committed}\n{log.read_text()[-3000:]}")


@pytest.mark.timeout(300)
def test_a_live_worker_reports_the_offsets_parked_events_and_sinks_of_what_it_processed(
    fresh_stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fresh_stack.info is not None
    broker, es_url = f"kafka://{fresh_stack.info.kafka_bootstrap}", fresh_stack.info.es_url
    app_id = f"support-desk-{uuid.uuid4().hex[:8]}"
    history = generate_history(SEED, 10, (f"{app_id}-a", f"{app_id}-b"))
    events = by_topic(deliver(history.events, SEED))
    asyncio.run(ensure_topics(broker, {t: 2 for t in app.topics()}))
    produced = asyncio.run(_produce(broker, events))
    fed = [a for a in app.agents if not a.lookups]  # the generator sends no mail replies (lookups)
    assert set(produced) == {a.topic for a in fed} and sum(produced.values()) > 50
    port = free_port()
    env = {
        "CONVERGE_ES_URL": es_url,
        "CONVERGE_ES_TOMBSTONES": "document",
        "CONVERGE_APP_ID": app_id,
        "CONVERGE_WIDE_STORE": f"sqlite:///{(tmp_path / 'wide.db').resolve()}",
        "CONVERGE_PARTITIONS": "2",
        "CONVERGE_WEB_PORT": str(port),
    }
    url = f"http://127.0.0.1:{port}"
    changes = app.change_topic(app.projection("tickets"))
    log = tmp_path / "worker" / "worker.log"
    worker = start_worker("examples.support_desk.app:app", tmp_path / "worker", broker, env)
    try:
        m = _scrape_until_settled(url, produced, changes, log)
        assert main(["status", "--url", url]) == 0
        table = capsys.readouterr().out
        assert main(["status", "--url", url, "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]

    change_count = sum(asyncio.run(end_offsets(broker, changes)).values())
    assert change_count > 0
    assert len(m["converge_partition_lag"]) == 2 * len(app.topics())  # both partitions of every topic
    for a in fed:  # every offset of every partition, consumed and committed: no lag
        n = produced[a.topic]
        for what in ("consumed_offset", "committed_offset", "end_offset"):
            assert _sum(m, f"converge_partition_{what}", runtime=a.name, topic=a.topic) == n, (a.name, what)
        assert _sum(m, "converge_partition_lag", runtime=a.name) == 0
        parked = 1 if a.name == "tickets" else 0
        assert _one(m, "converge_parked_total", runtime=a.name) == parked
        assert _one(m, "converge_processed_total", runtime=a.name) + parked == n
        received = _one(m, "converge_received_total", runtime=a.name)
        assert received == n
        # every message came in one micro-batch, each batch observed once
        assert _one(m, "converge_batch_size_sum", runtime=a.name) == received
        assert _one(m, "converge_batch_size_count", runtime=a.name) == _one(m, "converge_batches_total",
                                                                               runtime=a.name)  # fmt: skip
    assert _sum(m, "converge_partition_committed_offset", runtime="project.tickets") == change_count
    assert _sum(m, "converge_partition_lag", runtime="project.tickets") == 0
    assert _one(m, "converge_received_total", runtime="project.tickets") == change_count
    idle = ("converge_in_flight", "converge_blocked_keys", "converge_partition_skipped",
            "converge_partition_blocked_keys", "converge_partition_paused", "converge_sink_down")  # fmt: skip
    for gauge in idle:
        assert m[gauge] and all(v == 0 for _, v in m[gauge]), (gauge, m[gauge])
    for sink in ("wide_column", "change_feed", "index"):  # each sink's calls were timed
        assert _one(m, "converge_sink_latency_seconds_count", sink=sink) > 0
    # the dashboard has data (the change verifier's panels: tests/verify/test_live_worker.py)
    assert dashboard.metric_names(dashboard.load()) - set(m) - dashboard.verify_names() == set()
    assert _one(m, "converge_gc_frozen_objects") > 10_000  # the worker froze its start-up heap
    assert _one(m, "python_gc_collections_total", generation="0") > 0

    [(labels, n)] = m["converge_parked_events"]
    [record] = [e.record for e in DeadLetterStore(tmp_path / "worker" / "dlq").ordered()]
    assert n == 1 and record.value == BAD and record.stage == "parse"
    assert labels == {"runtime": "tickets", "stage": "parse", "error_class": record.error_class}

    tickets = next(line.split() for line in table.splitlines() if line.startswith("tickets "))
    assert tickets[1:4] == ["2", "0", "0"]  # partitions, lag, pending
    assert summary["tickets"]["parked"] == 1 and summary["tickets"]["lag"] == 0
    assert summary["tickets"]["parked_by"] == {f"parse/{record.error_class}": 1}
    assert summary["project.tickets"]["processed"] == change_count
    assert all(not s["sinks_down"] and s["in_flight"] == 0 for s in summary.values())
