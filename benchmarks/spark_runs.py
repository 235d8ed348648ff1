"""Figures of repeated Spark benchmark runs: medians with their ranges, and CPU per process class
(the driver, the Spark JVM, Spark's Python workers; ``benchmarks.proc_cpu``) per row or event."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["CLASSES", "print_table", "spread"]

#: The process classes the tables show.
CLASSES = ("driver", "jvm", "workers")
_ONE = {"rows": "row", "events": "event", "entities": "entity"}


def spread(values: Sequence[float], fmt: str = ".1f") -> str:
    """``median (min-max)``."""
    med = format(statistics.median(values), fmt)
    return med if len(values) == 1 else f"{med} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def print_table(results: list[dict[str, Any]], unit: str) -> None:
    """Per mode and size: medians (ranges) of wall seconds, ``unit``/s, CPU seconds of the tree and
    CPU microseconds per ``unit`` of each process class (driver / JVM / Python workers)."""
    per = f"CPU µs per {_ONE.get(unit, unit)}: driver / JVM / workers"
    print(f"| mode | {unit} | runs | seconds | {unit}/s | CPU s | {per} | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode, n in dict.fromkeys((r["mode"], r[unit]) for r in results):
        mine = [r for r in results if (r["mode"], r[unit]) == (mode, n)]
        per = " / ".join(spread([r["cpu_split"][k] / n * 1e6 for r in mine], ".0f") for k in CLASSES)
        figures = (
            f"{spread([r['seconds'] for r in mine])} | {spread([r[f'{unit}_per_s'] for r in mine], ',.0f')}"
        )
        loads = f"{min(r['load'] for r in mine)}-{max(r['load'] for r in mine)}"
        # a negative tree reading (a Python worker gone unreaped between the readings took its
        # seconds with it) is left out
        readings = [r["cpu_s"] for r in mine if r["cpu_s"] >= 0]
        cpu = spread(readings) if readings else "n/a"
        print(f"| {mode} | {n:,} | {len(mine)} | {figures} | {cpu} | {per} | {loads} |")
