"""Reading a worker's metrics back: fetch ``/metrics`` and sum it up per runtime."""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from framework.metrics import names
from framework.metrics.endpoint import METRICS_PATH

__all__ = [
    "RuntimeSummary",
    "VerifySummary",
    "bucket_quantile",
    "fetch_metrics",
    "metrics_url",
    "summarize",
    "summarize_verify",
]


@dataclass
class RuntimeSummary:
    """One runtime at a glance: partition sums, current gauges, totals, parked and sinks down."""

    runtime: str
    partitions: int = 0
    lag: int = 0
    pending: int = 0
    paused: int = 0
    skipped: int = 0
    in_flight: int = 0
    blocked_keys: int = 0
    processed: int = 0
    retried: int = 0
    parked: int = 0
    #: live parked records by ``stage/error_class``
    parked_by: dict[str, int] = field(default_factory=dict)
    sinks_down: list[str] = field(default_factory=list)
    #: partitions stalled now and the longest stall's seconds (the group watch's)
    stalled: int = 0
    stall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class VerifySummary:
    """The worker's change verifier at a glance: counts, by category, lag quantiles, behind, full
    sweeps and the last one's age."""

    documents: int = 0
    entries: int = 0
    errors: int = 0
    divergent: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)
    parked: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    lag_p50_s: float | None = None
    lag_p99_s: float | None = None
    behind_s: float | None = None
    sweeps: int = 0
    last_sweep_age_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def bucket_quantile(buckets: Sequence[tuple[float, float]], quantile: float) -> float | None:
    """The ``quantile`` (0..1) of a histogram's cumulative ``(upper bound, count)`` buckets, in
    bound order: linear within the bucket it falls in, as Prometheus' ``histogram_quantile``
    (beyond the last finite bound: that bound); None for an empty histogram."""
    total = buckets[-1][1] if buckets else 0
    if not total:
        return None
    rank, lower, below = quantile * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = bound, count
    return lower


def summarize_verify(text: str) -> VerifySummary | None:
    """What the change verifier's metrics in ``text`` say (None when the worker runs none)."""
    out: VerifySummary | None = None
    counters = {f"{m}_total": f for f, m in names.VERIFY_COUNTERS.items()}
    by_category = {f"{m}_total": f for f, m in names.VERIFY_BY_CATEGORY.items()}
    lags: list[tuple[float, float]] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in counters:
                out = out or VerifySummary()
                setattr(out, {"verified": "documents"}.get(counters[s.name], counters[s.name]), int(s.value))
            elif s.name in by_category:
                out = out or VerifySummary()
                getattr(out, by_category[s.name])[s.labels["category"]] = int(s.value)
            elif s.name == f"{names.VERIFY_LAG}_bucket":
                lags.append((float(s.labels["le"]), s.value))
            elif s.name == names.VERIFY_BEHIND and out is not None:
                out.behind_s = round(s.value, 1)
            elif s.name == names.VERIFY_SWEEP_AGE and out is not None:
                out.last_sweep_age_s = round(s.value, 1)
    if out is not None:
        lags.sort()
        for name, q in (("lag_p50_s", 0.5), ("lag_p99_s", 0.99)):
            value = bucket_quantile(lags, q)
            setattr(out, name, None if value is None else round(value, 1))
    return out


def metrics_url(url: str) -> str:
    """``url`` with the metrics path when it names only a server (``http://127.0.0.1:6066``)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    path = parts.path if parts.path not in ("", "/") else METRICS_PATH
    return parts._replace(path=path).geturl()


def fetch_metrics(url: str, *, timeout: float = 5.0, token: str | None = None) -> str:
    """The text a worker's metrics endpoint serves (OSError when it cannot be read)."""
    request = urllib.request.Request(metrics_url(url))  # noqa: S310 - checked http(s) above
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        return response.read().decode("utf-8")


def summarize(text: str) -> dict[str, RuntimeSummary]:
    """Per runtime, by name: what the metrics in ``text`` say. Lag is the sum over every
    partition reported (the group's, when the worker reads it from the broker); partitions
    counts those held by this worker."""
    out: dict[str, RuntimeSummary] = {}

    def of(labels: dict[str, str]) -> RuntimeSummary:
        name = labels["runtime"]
        return out.setdefault(name, RuntimeSummary(name))

    partitions: dict[str, set[tuple[str, str]]] = {}
    not_owned: dict[str, set[tuple[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "runtime" not in s.labels:
                continue
            r, v = of(s.labels), int(s.value)
            if s.name in names.PARTITION.values():
                tp = (s.labels["topic"], s.labels["partition"])
                partitions.setdefault(r.runtime, set()).add(tp)
                if s.name == names.PARTITION["owned"] and not v:
                    not_owned.setdefault(r.runtime, set()).add(tp)
            if s.name == names.PARTITION["lag"]:
                r.lag += v
            elif s.name == names.PARTITION["pending"]:
                r.pending += v
            elif s.name == names.PARTITION["paused"]:
                r.paused += v
            elif s.name == names.PARTITION["skipped"]:
                r.skipped += v
            elif s.name == names.RUNTIME_GAUGES["in_flight"]:
                r.in_flight = v
            elif s.name == names.RUNTIME_GAUGES["blocked_keys"]:
                r.blocked_keys = v
            elif s.name == names.counter_name("processed") + "_total":
                r.processed = v
            elif s.name == names.counter_name("retried") + "_total":
                r.retried = v
            elif s.name == names.PARKED:
                r.parked += v
                key = f"{s.labels['stage']}/{s.labels['error_class']}"
                r.parked_by[key] = r.parked_by.get(key, 0) + v
            elif s.name == names.SINK_DOWN and v:
                r.sinks_down.append(s.labels["sink"])
            elif s.name == names.STALLED_PARTITIONS:
                r.stalled = v
            elif s.name == names.STALL_SECONDS:
                r.stall_s = round(s.value, 1)
    for name, seen in partitions.items():  # held here: those the broker does not give another
        out[name].partitions = len(seen - not_owned.get(name, set()))
    return dict(sorted(out.items()))
