"""``framework.worker.heap``: the worker's start-up heap frozen, later garbage still collected.

Each case runs in a fresh interpreter: freezing the test process's heap would
keep every later test's objects out of collection.
"""

from __future__ import annotations

import json
import subprocess
import sys

from framework.worker.heap import WORKER_THRESHOLDS

PROBE = """
import gc, json, weakref
from framework.worker.heap import freeze_startup_heap

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)

gc.disable()  # nothing collects behind the probe's back
before = cycle()  # garbage left by start-up: collected before the freeze
kept = Node()  # alive at the freeze: frozen with the rest
frozen = freeze_startup_heap()
after = cycle()  # garbage made once frozen: still collected
collected = gc.collect()
print(json.dumps({
    "frozen": frozen,
    "count_now": gc.get_freeze_count(),
    "thresholds": gc.get_threshold(),
    "before_gone": before() is None,
    "after_gone": after() is None,
    "collected": collected,
    "kept_tracked": any(o is kept for o in gc.get_objects()),
}))
"""


def _probe() -> dict[str, object]:
    cmd = [sys.executable, "-c", PROBE]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_freeze_keeps_start_up_objects_out_and_still_collects_later_garbage() -> None:
    got = _probe()
    assert got["before_gone"] and got["after_gone"]
    assert got["collected"] >= 2  # the later cycle's two nodes (and their dicts)
    assert got["frozen"] == got["count_now"] and int(got["frozen"]) > 1_000  # type: ignore[call-overload]
    assert not got["kept_tracked"]  # a frozen object is in no generation the collector scans
    assert tuple(got["thresholds"]) == WORKER_THRESHOLDS  # type: ignore[call-overload]
