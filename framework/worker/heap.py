"""A worker's garbage collector, set for a long-running process with a large start-up heap.

A worker holds everything Faust, aiokafka, the store and index clients and
the app import and build at start-up, some 110,000 objects, almost none of
which ever becomes garbage. CPython's full collections traverse all of them
again every second or so of steady processing, and its young collections
run every 700 allocations. ``freeze_startup_heap`` moves the start-up heap
into the collector's permanent generation once the worker has started and
makes young collections rare; objects made afterwards are collected as
before. A young collection walks every container object made since the last
one that is still alive: in a worker that is the micro-batch in flight (up to
``RuntimeConfig.max_batch`` messages and their events, mutations and rows),
which every collection walked again and moved on to older generations to be
walked there, while the demo's steady processing left no cyclic garbage for
it to find. So a young collection waits for a million more container objects
than were freed. The demo's worker CPU with and without it is in
BENCHMARKS.md.
"""

from __future__ import annotations

import gc

__all__ = ["GC_MODES", "WORKER_THRESHOLDS", "freeze_startup_heap"]

#: ``freeze``: ``freeze_startup_heap`` once started; ``default``: the collector as CPython sets it.
GC_MODES = ("freeze", "default")
#: Collector thresholds of a worker (CPython's defaults are 700, 10, 10).
WORKER_THRESHOLDS = (1_000_000, 10, 10)


def freeze_startup_heap() -> int:
    """Collect what start-up left as garbage, freeze every surviving object and set
    ``WORKER_THRESHOLDS``; returns how many objects are frozen (never collected from then on,
    so call this once, after start-up)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*WORKER_THRESHOLDS)
    return gc.get_freeze_count()
