"""Garbage collection in executor tasks that allocate many short-lived objects.

A Python worker holds every module Spark, pandas, pyarrow and the app
import. A task that decodes and projects rows allocates millions of small
containers, and each full collection they trigger traverses that whole
heap again: in a profile of the convergence check, about half of the
projection's CPU time went to the collector. ``few_collections`` collects
once, freezes what the worker holds (the collector skips it) and raises the
young-generation threshold for the task, then restores both.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["few_collections"]

#: Allocations between young-generation collections during a task (CPython's default is 700).
_THRESHOLD = 20_000


@contextmanager
def few_collections() -> Iterator[None]:
    """Within the block: the heap as it was is frozen, young collections are rarer."""
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(max(threshold[0], _THRESHOLD), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
