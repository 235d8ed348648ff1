"""The names of the metrics a worker exports (``framework.metrics``), in one place.

Read by the collector, ``converge status`` and the dashboard's test. Labels:
``runtime`` is an agent's name or ``project.<projection>``; ``topic`` and
``partition`` name a Kafka partition; ``sink`` a destination.
"""

from __future__ import annotations

__all__ = [
    "PREFIX",
    "RUNTIME_GAUGES",
    "counter_name",
    "PARTITION",
    "SINK_DOWN",
    "SINK_OUTAGES",
    "SINK_RECENT_FAILURES",
    "PARKED",
    "SINK_LATENCY",
    "BATCH_SIZE",
    "LOOKUP_PENDING",
    "LOOKUP_OVERDUE",
    "GC_FROZEN",
    "GROUP_MEMBERS",
    "STALLED_PARTITIONS",
    "STALL_SECONDS",
    "GROUP_STALLS",
    "GROUP_MEMBERS_REMOVED",
    "VERIFY_COUNTERS",
    "VERIFY_BY_CATEGORY",
    "VERIFY_LAG",
    "VERIFY_BEHIND",
    "ALL",
]

PREFIX = "converge_"

#: ``Counters`` fields that are current values (gauges), with the metric each becomes.
RUNTIME_GAUGES: dict[str, str] = {
    "in_flight": "converge_in_flight",
    "blocked_keys": "converge_blocked_keys",
    "lag": "converge_runtime_lag",
    "last_batch_size": "converge_last_batch_size",
}

#: Per partition (labels runtime, topic, partition), by what each holds.
PARTITION: dict[str, str] = {
    "consumed": "converge_partition_consumed_offset",
    "committed": "converge_partition_committed_offset",
    "end": "converge_partition_end_offset",
    "lag": "converge_partition_lag",
    "pending": "converge_partition_pending",
    "paused": "converge_partition_paused",
    "blocked": "converge_partition_blocked_keys",
    "skipped": "converge_partition_skipped",
    "owned": "converge_partition_owned",
    "stall": "converge_partition_stall_seconds",
}

SINK_DOWN = "converge_sink_down"
SINK_OUTAGES = "converge_sink_outages"  # a counter: exported as ..._total
SINK_RECENT_FAILURES = "converge_sink_recent_failures"
PARKED = "converge_parked_events"
SINK_LATENCY = "converge_sink_latency_seconds"
BATCH_SIZE = "converge_batch_size"
#: Events waiting for a lookup entry, and those waiting past ``JoinConfig.report_after_s``
#: (labels runtime, lookup).
LOOKUP_PENDING = "converge_lookup_pending"
LOOKUP_OVERDUE = "converge_lookup_overdue"
#: Objects in the garbage collector's permanent generation (``framework.worker.heap``).
GC_FROZEN = "converge_gc_frozen_objects"
#: The consumer group as the worker's group watch last read it from the broker (label runtime:
#: the partitions of that runtime's topic): members, partitions stalled now and the longest
#: stall's seconds, stalls so far (a counter), dead members removed (a counter, group-wide).
GROUP_MEMBERS = "converge_group_members"
STALLED_PARTITIONS = "converge_stalled_partitions"
STALL_SECONDS = "converge_stall_seconds"
GROUP_STALLS = "converge_group_stalls"
GROUP_MEMBERS_REMOVED = "converge_group_members_removed"


#: The change verifier (``framework.verify``) of a worker with the ``verify`` setting: counters of
#: documents verified, entries committed and failed steps; by category (label ``category``):
#: divergences found, repaired and parked, and repairs the index refused; seconds from a change's
#: ingestion to its verification (a histogram); seconds since the oldest change not verified yet was
#: ingested (0 when it keeps up);
#: full sweeps finished, and the seconds since the last one finished.
VERIFY_COUNTERS: dict[str, str] = {
    "verified": "converge_verify_documents",
    "entries": "converge_verify_entries",
    "errors": "converge_verify_errors",
    "sweeps": "converge_verify_sweeps",
}
VERIFY_BY_CATEGORY: dict[str, str] = {
    "divergent": "converge_verify_divergences",
    "repaired": "converge_verify_repaired",
    "parked": "converge_verify_parked",
    "refused": "converge_verify_refused",
}
VERIFY_LAG = "converge_verify_lag_seconds"
VERIFY_BEHIND = "converge_verify_behind_seconds"
VERIFY_SWEEP_AGE = "converge_verify_last_sweep_age_seconds"


def counter_name(field: str) -> str:
    """The metric of a monotonic ``Counters`` field, without the ``_total`` suffix."""
    return f"{PREFIX}{field}"


#: Every fixed name (counters of ``Counters`` fields come from ``counter_name``).
ALL: frozenset[str] = frozenset(
    {*RUNTIME_GAUGES.values(), *PARTITION.values(), SINK_DOWN, SINK_OUTAGES, SINK_RECENT_FAILURES,
     PARKED, SINK_LATENCY, BATCH_SIZE, LOOKUP_PENDING, LOOKUP_OVERDUE, GC_FROZEN, GROUP_MEMBERS,
     STALLED_PARTITIONS, STALL_SECONDS, GROUP_STALLS, GROUP_MEMBERS_REMOVED, *VERIFY_COUNTERS.values(),
     *VERIFY_BY_CATEGORY.values(), VERIFY_LAG, VERIFY_BEHIND}
)  # fmt: skip
