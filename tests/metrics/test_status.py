"""``converge status``: the metrics text summed up per runtime, and its errors."""

from __future__ import annotations

import pytest
from faust.types import TP
from prometheus_client import CollectorRegistry, generate_latest

from framework.cli import main
from framework.local_stack import free_port
from framework.metrics import ConvergeCollector, PartitionOffsets, Snapshot
from framework.metrics.summary import metrics_url, summarize


def _text(snap: Snapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConvergeCollector(lambda: snap))
    return generate_latest(registry).decode()


def test_the_summary_sums_partitions_and_keeps_the_parked_classes() -> None:
    failed = {"k1": {"offset": 3}, "k2": {"offset": 9}}
    status = {
        "counters": {"processed": 40, "retried": 6, "in_flight": 3, "blocked_keys": 2},
        "partitions": {
            str(TP("orders", 0)): {"pending": 5, "paused": True, "failed": failed, "skipped": 4},
            str(TP("orders", 1)): {"pending": 1, "paused": False, "failed": {}, "skipped": 0},
        },
        "sinks": {"index": {"down": True, "outages": 1, "recent_failures": 9}},
    }
    offsets = [
        PartitionOffsets("orders", "orders", 0, consumed=50, committed=45, end=60),
        PartitionOffsets("orders", "orders", 1, consumed=9, committed=9, end=9),
    ]
    parked = {("orders", "parse", "EventError"): 2, ("orders", "map", "KeyError"): 1}
    sinks = {"orders": ("wide_column", "index"), "project.docs": ("wide_column", "index")}
    runtimes = {"orders": status, "project.docs": {"counters": {"processed": 7}}}
    snap = Snapshot(runtimes, offsets, parked, sinks)
    rows = summarize(_text(snap))
    assert list(rows) == ["orders", "project.docs"]
    o = rows["orders"]
    assert (o.partitions, o.lag, o.pending, o.paused, o.skipped) == (2, 15, 6, 1, 4)
    assert (o.in_flight, o.blocked_keys, o.processed, o.retried) == (3, 2, 40, 6)
    assert o.parked == 3 and o.parked_by == {"parse/EventError": 2, "map/KeyError": 1}
    assert o.sinks_down == ["index"]
    d = rows["project.docs"]
    assert (d.processed, d.parked, d.sinks_down, d.partitions) == (7, 0, [], 0)


def test_a_url_without_a_path_means_the_metrics_path() -> None:
    assert metrics_url("http://127.0.0.1:6066") == "http://127.0.0.1:6066/metrics"
    assert metrics_url("127.0.0.1:7000/") == "http://127.0.0.1:7000/metrics"
    assert metrics_url("http://h:1/custom") == "http://h:1/custom"
    with pytest.raises(ValueError, match="not an http"):
        metrics_url("file:///etc/passwd")


def test_no_worker_there_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert main(["status", "--url", f"http://127.0.0.1:{port}", "--timeout", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"converge status: error: cannot read http://127.0.0.1:{port}/metrics"
    )
    assert main(["status", "--url", "ftp://example.invalid/"]) == 1
    assert "not an http(s) URL" in capsys.readouterr().err


def test_the_group_watch_view_gives_stalls_and_counts_only_the_partitions_held_here() -> None:
    group = {"state": "Stable", "members": 2, "lag": 70, "stalled": {"orders[1]": 42.5}, "stalls": 3,
             "members_removed": 1}  # fmt: skip
    offsets = [
        PartitionOffsets("orders", "orders", 0, consumed=50, committed=45, end=60, owned=True, stalled_s=0.0,
                         from_start=True),
        PartitionOffsets("orders", "orders", 1, consumed=None, committed=None, end=55, owned=False,
                         stalled_s=42.5, from_start=True),
    ]  # fmt: skip
    text = _text(Snapshot({"orders": {"counters": {}, "group": group}}, offsets))
    o = summarize(text)["orders"]
    assert (o.partitions, o.lag, o.stalled, o.stall_s) == (1, 15 + 55, 1, 42.5)
    for line in ('converge_stalled_partitions{runtime="orders"} 1.0',
                 'converge_group_stalls_total{runtime="orders"} 3.0',
                 'converge_group_members{runtime="orders"} 2.0',
                 'converge_group_members_removed_total{runtime="orders"} 1.0',
                 'converge_partition_stall_seconds{partition="1",runtime="orders",topic="orders"} 42.5',
                 'converge_partition_owned{partition="1",runtime="orders",topic="orders"} 0.0'):  # fmt: skip
        assert line in text, line
