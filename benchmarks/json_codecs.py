"""The standard library's json against orjson where converge decodes JSON per event or row.

    pip install orjson   # not a dependency of converge: this script measures whether it pays
    python -m benchmarks.json_codecs --rows 50000 --repeat 5

Three places, each side by side in one run (best of ``--repeat``, microseconds per item):

- the worker's event parse: ``json.loads`` of a raw event (the reference app's generated
  history) against ``orjson.loads``, and ``parse_event`` as a whole for scale;
- the Spark projection's record decode: ``rows_from_records`` (one ``json`` decode per column
  with hooks that build cells) against ``orjson.loads`` of the same column and a comprehension
  that builds the same cells;
- the check's canonical JSON: ``canonical_json`` against ``orjson.dumps`` with sorted keys
  (which is not the same text for every value: floats and big integers differ).
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.spark_check_inputs import ACTIVITY_HUB, ENGAGEMENT_LOG, PROJECTION, synth_rows
from examples.activity_platform.generator import generate_history
from framework.core.cells import Cell
from framework.core.events import parse_event
from framework.core.rows import Row
from spark_batch.codec import canonical_json, row_to_record, rows_from_records

try:
    import orjson

    HAVE_ORJSON = True
except ImportError:  # pragma: no cover - the point of the script is to measure it
    HAVE_ORJSON = False


def best(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """Microseconds per item of ``fn`` over ``n`` items, best of ``repeat``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times) / n * 1e6


def _value(v: Any) -> Any:
    return base64.b64decode(v["$b64"]) if type(v) is dict else v


def orjson_rows(keys: Sequence[str], cells: Sequence[str]) -> list[Row]:
    """``rows_from_records`` with orjson doing the parsing."""
    decoded_keys = orjson.loads("[" + ",".join(keys) + "]")
    decoded_cells = orjson.loads("[" + ",".join(cells) + "]")
    return [
        Row({n: _value(v) for n, v in k.items()}, {n: Cell(_value(v), int(wt)) for n, (v, wt) in c.items()})
        for k, c in zip(decoded_keys, decoded_cells, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not HAVE_ORJSON:
        sys.exit("orjson is not installed: pip install orjson")
    import json

    raw = [e.to_json() for e in generate_history(7, args.rows).events]
    texts = [r.decode() for r in raw]
    n = len(raw)
    print(f"event parse, {n} events (us/event)")
    std = best(lambda: [json.loads(t) for t in texts], n, args.repeat)
    fast = best(lambda: [orjson.loads(r) for r in raw], n, args.repeat)
    whole = best(lambda: [parse_event(r) for r in raw], n, args.repeat)
    print(f"  json.loads {std:6.2f}   orjson.loads {fast:6.2f}   ratio {std / fast:4.1f}x", end="")
    print(f"   parse_event as a whole {whole:6.2f}")

    hubs = [synth_rows(i) for i in range(args.rows)]
    records = [row_to_record(ACTIVITY_HUB, hub) for hub, _log, _mark in hubs]
    keys, cells = [r[2] for r in records], [r[3] for r in records]
    assert orjson_rows(keys[:100], cells[:100]) == rows_from_records(keys[:100], cells[:100])
    m = len(records)
    print(f"Spark record decode, {m} hub rows (us/row)")
    std = best(lambda: rows_from_records(keys, cells), m, args.repeat)
    fast = best(lambda: orjson_rows(keys, cells), m, args.repeat)
    print(f"  json hooks {std:6.2f}   orjson + comprehension {fast:6.2f}   ratio {std / fast:4.1f}x")

    docs = [
        PROJECTION.document(dict(hub.key), {ACTIVITY_HUB.name: [hub], ENGAGEMENT_LOG.name: log}, mark)[1]
        for hub, log, mark in hubs
    ]
    print(f"canonical JSON, {m} documents (us/document)")
    std = best(lambda: [canonical_json(d) for d in docs], m, args.repeat)
    fast = best(lambda: [orjson.dumps(d, option=orjson.OPT_SORT_KEYS) for d in docs], m, args.repeat)
    same = sum(canonical_json(d).encode() == orjson.dumps(d, option=orjson.OPT_SORT_KEYS) for d in docs)
    print(f"  canonical_json {std:6.2f}   orjson.dumps {fast:6.2f}   ratio {std / fast:4.1f}x", end="")
    print(f"   same text {same}/{m}")


if __name__ == "__main__":
    main()
