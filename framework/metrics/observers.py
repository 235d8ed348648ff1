"""The two metrics observed as things happen: sink call latency and micro-batch sizes.

- Sink latency: ``framework.runtime.processor.bounded`` times every sink call
  and hands the duration to ``processor.sink_timer``; ``time_sinks`` sets it
  to ``SINK_LATENCY`` (one histogram per process, labelled by sink).
- Batch sizes: the runtime sets ``counters.last_batch_size`` once per
  micro-batch; ``observe_batches`` gives a runtime ``ObservedCounters`` (the
  same counters) that also hands each size to a histogram.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import Histogram

from framework.metrics import names
from framework.runtime import processor
from framework.runtime.counters import Counters

__all__ = [
    "SINK_LATENCY",
    "LATENCY_BUCKETS",
    "BATCH_BUCKETS",
    "time_sinks",
    "ObservedCounters",
    "observe_batches",
]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)

#: Seconds per sink call (timeouts and failures included), labelled by sink; in no registry
#: until an endpoint registers it.
SINK_LATENCY = Histogram(
    names.SINK_LATENCY, "seconds one call to a sink took", ["sink"], buckets=LATENCY_BUCKETS, registry=None
)


_BY_SINK: dict[str, Any] = {}  # each sink's histogram child, looked up once


def _observe_sink(sink: str, seconds: float) -> None:
    child = _BY_SINK.get(sink)
    if child is None:
        child = _BY_SINK[sink] = SINK_LATENCY.labels(sink)
    child.observe(seconds)


def time_sinks() -> None:
    """Time every sink call of this process into ``SINK_LATENCY``."""
    processor.sink_timer = _observe_sink


class ObservedCounters(Counters):
    """``Counters`` whose ``last_batch_size``, when set, is also handed to ``on_batch``."""

    def __init__(self, on_batch: Callable[[int], Any], **values: int) -> None:
        self._on_batch: Callable[[int], Any] | None = None
        super().__init__(**values)
        self._on_batch = on_batch

    @property
    def last_batch_size(self) -> int:
        return self._last_batch_size

    @last_batch_size.setter
    def last_batch_size(self, size: int) -> None:
        self._last_batch_size = size
        if self._on_batch is not None:
            self._on_batch(size)


def observe_batches(runtime: Any, on_batch: Callable[[int], Any]) -> None:
    """Give ``runtime`` (an ``AgentRuntime`` not started yet) counters that report each
    micro-batch size to ``on_batch``, keeping the values counted so far."""
    runtime.counters = ObservedCounters(on_batch, **runtime.counters.snapshot())
