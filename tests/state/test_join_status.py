"""Pending events are visible: the join status per lookup, exported as Prometheus gauges."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from framework.metrics import ConvergeCollector, Snapshot
from framework.state import JoinConfig
from framework.state.processor import JoinProcessor
from framework.testing import Driver
from tests.state.join_app import child, join_app, parent_set


def test_pending_and_overdue_per_lookup_in_the_status_and_the_metrics() -> None:
    with Driver(join_app(JoinConfig(report_after_s=30))) as d:
        d.send([child("m1", "c1", "a", 10), child("m2", "c2", "b", 10), parent_set("c2", "A", "x", 1)])
        processor = d._agents["children"]  # noqa: SLF001 - the driver's own processor
        assert isinstance(processor, JoinProcessor)
        assert processor.join_status()["lookups"]["parent"]["pending"] == 1
        processor.book.clock = lambda: 10**10  # much later: the entry never came
        status = processor.join_status()
    assert status["lookups"]["parent"]["overdue"] == 1 and status["pending"] == 1
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConvergeCollector(lambda: Snapshot({"children": {"joins": status}})))
    text = generate_latest(registry).decode()
    assert 'converge_lookup_pending{lookup="parent",runtime="children"} 1.0' in text
    assert 'converge_lookup_overdue{lookup="parent",runtime="children"} 1.0' in text
