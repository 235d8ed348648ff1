"""``ConvergeCollector``: a Prometheus collector that turns a ``Snapshot`` into metric families.

Nothing is counted on the hot path for these: every value is read from the
snapshot at scrape time. Per runtime (label ``runtime``): each ``Counters``
field, totals as ``converge_<field>_total`` counters and the current values
in ``names.RUNTIME_GAUGES`` as gauges. Per partition (``runtime``, ``topic``,
``partition``): consumed, committed and end offsets, lag (end - committed),
pending (received, not yet acknowledged), paused, blocked keys and skipped
(events waiting behind a blocked key). Per sink (``runtime``, ``sink``): down,
outages, failures in the back-off window. Parked records (``runtime``,
``stage``, ``error_class``): live records of the dead-letter WAL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from framework.metrics import names
from framework.metrics.snapshot import Snapshot, split_tp

__all__ = ["ConvergeCollector"]

_PART_LABELS = ["runtime", "topic", "partition"]
_PART_HELP = {
    "consumed": "next offset after the last one read",
    "committed": "committed offset of the consumer group",
    "end": "end offset (high watermark) of the partition",
    "lag": "messages after the committed offset (end - committed)",
    "pending": "messages received and not yet acknowledged",
    "paused": "1 while consumption of the partition is paused",
    "blocked": "relation keys held back by a failing event",
    "skipped": "events waiting behind blocked keys (the skipped queue)",
    "owned": "1 while this worker holds the partition (the broker's group description)",
    "stall": "seconds the partition's lag has not shrunk by a commit (0 without lag)",
}


class ConvergeCollector(Collector):
    """Collects the metric families of ``source()``, a snapshot taken just before the scrape."""

    def __init__(self, source: Callable[[], Snapshot]) -> None:
        self._source = source

    def describe(self) -> list[Metric]:
        """Nothing up front: the families depend on the snapshot."""
        return []

    def collect(self) -> Iterator[Metric]:
        snap = self._source()
        yield from _runtime_families(snap.runtimes)
        yield from _partition_families(snap)
        yield from _sink_families(snap)
        yield from _lookup_families(snap.runtimes)
        yield from _group_families(snap.runtimes)
        parked = GaugeMetricFamily(names.PARKED, "parked events not yet replayed or discarded",
                                   labels=["runtime", "stage", "error_class"])  # fmt: skip
        for (runtime, stage, error_class), n in sorted(snap.parked.items()):
            parked.add_metric([runtime, stage, error_class], n)
        yield parked
        if snap.verify is not None:
            yield from _verify_families(snap.verify)


def _verify_families(status: Mapping[str, Any]) -> Iterator[Metric]:
    """The change verifier's counts, lag quantiles and how far behind it is (``Snapshot.verify``)."""
    for what, metric in names.VERIFY_COUNTERS.items():
        counter = CounterMetricFamily(metric, f"change verifier: {what}")
        counter.add_metric([], status.get(what, 0))
        yield counter
    for what, metric in names.VERIFY_BY_CATEGORY.items():
        text = f"change verifier: documents {what}, by category"
        counter = CounterMetricFamily(metric, text, labels=["category"])
        for category, n in sorted(status.get(what, {}).items()):
            counter.add_metric([category], n)
        yield counter
    text = "seconds from a change's ingestion to its verification"
    buckets = [("+Inf" if le is None else repr(float(le)), n) for le, n in status.get("lag_buckets", [])]
    if buckets:
        total = status.get("lag_sum", 0.0)
        yield HistogramMetricFamily(names.VERIFY_LAG, text, buckets=buckets, sum_value=total)
    behind = status.get("behind_seconds")
    if behind is not None:
        yield GaugeMetricFamily(names.VERIFY_BEHIND, "seconds since the oldest change not verified yet "
                                "was ingested (0: every settled change verified)", value=behind)  # fmt: skip
    age = status.get("last_sweep_age_seconds")
    if age is not None:
        text = "seconds since the last full sweep finished"
        yield GaugeMetricFamily(names.VERIFY_SWEEP_AGE, text, value=age)


def _runtime_families(runtimes: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
    for runtime, status in sorted(runtimes.items()):
        for field_name, value in sorted(status.get("counters", {}).items()):
            gauge = names.RUNTIME_GAUGES.get(field_name)
            fam = families.get(field_name)
            if fam is None:
                text = f"runtime counter {field_name}"
                fam = families[field_name] = (
                    GaugeMetricFamily(gauge, text, labels=["runtime"])
                    if gauge
                    else CounterMetricFamily(names.counter_name(field_name), text, labels=["runtime"])
                )
            fam.add_metric([runtime], value)
    yield from families.values()


def _lookup_families(runtimes: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """Pending and overdue events per lookup of each agent with lookups (``status()["joins"]``)."""
    pending = GaugeMetricFamily(names.LOOKUP_PENDING, "events waiting for a lookup entry",
                                labels=["runtime", "lookup"])  # fmt: skip
    overdue = GaugeMetricFamily(names.LOOKUP_OVERDUE, "events waiting past JoinConfig.report_after_s",
                                labels=["runtime", "lookup"])  # fmt: skip
    for runtime, status in sorted(runtimes.items()):
        for lookup, s in sorted(status.get("joins", {}).get("lookups", {}).items()):
            pending.add_metric([runtime, lookup], s.get("pending", 0))
            overdue.add_metric([runtime, lookup], s.get("overdue", 0))
    yield pending
    yield overdue


def _group_families(runtimes: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """The group as the worker's group watch read it (``status()["group"]``), per runtime."""
    labels = ["runtime"]
    members = GaugeMetricFamily(names.GROUP_MEMBERS, "members of the consumer group", labels=labels)
    stalled = GaugeMetricFamily(names.STALLED_PARTITIONS, "partitions with lag and no commit for "
                                "RuntimeConfig.stall_after seconds or more", labels=labels)  # fmt: skip
    seconds = GaugeMetricFamily(names.STALL_SECONDS, "seconds of the longest ongoing stall", labels=labels)
    stalls = CounterMetricFamily(names.GROUP_STALLS, "stalls that started so far", labels=labels)
    removed = CounterMetricFamily(names.GROUP_MEMBERS_REMOVED, "dead members removed from the group",
                                  labels=labels)  # fmt: skip
    for runtime, status in sorted(runtimes.items()):
        group = status.get("group")
        if not group:
            continue
        members.add_metric([runtime], group.get("members", 0))
        stalled.add_metric([runtime], len(group.get("stalled", {})))
        seconds.add_metric([runtime], max(group.get("stalled", {}).values(), default=0))
        stalls.add_metric([runtime], group.get("stalls", 0))
        removed.add_metric([runtime], group.get("members_removed", 0))
    yield from (members, stalled, seconds, stalls, removed)


def _partition_families(snap: Snapshot) -> Iterator[Metric]:
    values: dict[tuple[str, str, str], dict[str, float]] = {}
    for o in snap.offsets:
        row = values.setdefault((o.runtime, o.topic, str(o.partition)), {})
        stall = o.stalled_s
        for what, v in (("consumed", o.consumed), ("committed", o.committed), ("end", o.end), ("lag", o.lag),
                        ("owned", 1 if o.owned else 0), ("stall", stall)):  # fmt: skip
            if v is not None:
                row[what] = v
    for runtime, status in snap.runtimes.items():
        for key, part in status.get("partitions", {}).items():
            row = values.setdefault((runtime, *split_tp(key)), {})
            row["pending"] = part.get("pending", 0)
            row["paused"] = 1 if part.get("paused") else 0
            row["blocked"] = len(part.get("failed", {}))
            row["skipped"] = part.get("skipped", 0)
    for what, metric in names.PARTITION.items():
        fam = GaugeMetricFamily(metric, _PART_HELP[what], labels=_PART_LABELS)
        for labels, row in sorted(values.items()):
            if what in row:
                fam.add_metric(list(labels), row[what])
        yield fam


def _sink_families(snap: Snapshot) -> Iterator[Metric]:
    labels = ["runtime", "sink"]
    down = GaugeMetricFamily(names.SINK_DOWN, "1 while the sink counts as down (an outage)", labels=labels)
    outages = CounterMetricFamily(names.SINK_OUTAGES, "outages of the sink so far", labels=labels)
    recent = GaugeMetricFamily(names.SINK_RECENT_FAILURES, "failures in the back-off window", labels=labels)
    for runtime in sorted(set(snap.runtimes) | set(snap.sinks)):
        health_of: dict[str, Mapping[str, Any]] = dict.fromkeys(snap.sinks.get(runtime, ()), {})
        health_of.update(snap.runtimes.get(runtime, {}).get("sinks", {}))
        for sink, health in sorted(health_of.items()):
            down.add_metric([runtime, sink], 1 if health.get("down") else 0)
            outages.add_metric([runtime, sink], health.get("outages", 0))
            recent.add_metric([runtime, sink], health.get("recent_failures", 0))
    yield from (down, outages, recent)
