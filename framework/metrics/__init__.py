"""Prometheus metrics of a running worker, and what reads them back (``converge status``).

- ``names``: every metric name; ``snapshot``: what a scrape reads from the
  worker; ``collector``: the snapshot as metric families; ``observers``: sink
  latency and batch sizes, observed as they happen; ``endpoint``: ``GET
  /metrics`` on the worker's web server; ``summary``: what ``converge
  status`` prints (its command is ``framework.cli.status``).
"""

from framework.metrics.collector import ConvergeCollector
from framework.metrics.endpoint import METRICS_PATH, MetricsEndpoint, mount_metrics
from framework.metrics.snapshot import PartitionOffsets, Snapshot, take_snapshot

__all__ = [
    "ConvergeCollector",
    "METRICS_PATH",
    "MetricsEndpoint",
    "mount_metrics",
    "PartitionOffsets",
    "Snapshot",
    "take_snapshot",
]
