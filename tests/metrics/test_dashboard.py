"""docs/grafana/converge.json: valid, and every query reads a metric the worker exports."""

from __future__ import annotations

from dataclasses import fields

from framework.metrics import names
from framework.runtime.counters import Counters
from tests.metrics import dashboard
from tests.metrics.dashboard import load, metric_names, queries


def _exported() -> set[str]:
    """Every sample name the worker's collector and observers can produce."""
    out = set(names.RUNTIME_GAUGES.values()) | set(names.PARTITION.values())
    out |= {names.SINK_DOWN, names.SINK_RECENT_FAILURES, names.PARKED, f"{names.SINK_OUTAGES}_total"}
    totals = [f.name for f in fields(Counters) if f.name not in names.RUNTIME_GAUGES]
    out |= {f"{names.counter_name(name)}_total" for name in totals}
    out |= {f"{h}_{s}" for h in (names.SINK_LATENCY, names.BATCH_SIZE) for s in ("bucket", "sum", "count")}
    return out | dashboard.verify_names()


def test_every_query_reads_an_exported_metric() -> None:
    dashboard = load()
    used = metric_names(dashboard)
    assert used - _exported() == set()
    # what the issue asks operators to see is on it
    for wanted in ("converge_partition_lag", "converge_partition_committed_offset", "converge_in_flight",
                   "converge_blocked_keys", "converge_partition_skipped", "converge_parked_events",
                   "converge_sink_down", "converge_sink_latency_seconds_bucket", "converge_batch_size_bucket",
                   "converge_batch_fallbacks_total", "converge_verify_divergences_total",
                   "converge_verify_lag_seconds_bucket"):  # fmt: skip
        assert wanted in used, wanted


def test_the_dashboard_is_well_formed() -> None:
    dashboard = load()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] and dashboard["title"]
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "runtime"}
    for p in dashboard["panels"]:
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
        assert {"h", "w", "x", "y"} <= set(p["gridPos"])
    assert all(q.count("(") == q.count(")") for q in queries(dashboard))
