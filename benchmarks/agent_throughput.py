"""Agent throughput, side by side on the same events and sink, with the worker's CPU per event.

(a) raw aiokafka consume + JSON decode; (b1) a plain Faust agent, no writes;
(b2) a naive Faust agent awaiting each store write in turn; (c) the
KeyedAgent runtime; (c0) the runtime with a no-op sink, to separate its own
cost from the store's. The sink is the embedded SQLite store with an injected
latency per write (0 ms and 2 ms by default).

One aggregate declared against none (issue 26), without injected latency: (c-app) the worker
``build_worker`` wires for an ``App`` whose agent writes the bench row with the event's time;
(c-agg) the same ``App`` with one aggregate (``bench_apps.OrgDaily``: entities and the sum of
their ``n`` per organisation and UTC day of the event time; the events' times span 90 days, so
17 x 90 groups), which adds the change feed, the projector's contribution writes and the totals
processor on the group topic. A c-agg run ends once the totals processor has read every group
record (``bench_apps.DrainMeter``); its totals are then compared with a recomputation from the
produced events (the latest event of each key, by version): a difference fails the benchmark.

Beside events/s, the CPU seconds per event (printed in microseconds) of the process doing the
work: user + system time from ``/proc/<pid>/stat`` (utime + stime over ``SC_CLK_TCK``). For
(b1) to (c-agg) that is the worker, sampled in the worker over its measured interval (see
``bench_apps``); for (a) this process, sampled at its first and its last record. ``/proc``
counts in clock ticks (10 ms here): a run of a few seconds reads to a few percent. The
calibration line comes first (``benchmarks.calibration.calibrate``).

    python -m benchmarks.agent_throughput --events 20000 --keys 1000 --latency-ms 0 2 --repeat 3
    python -m benchmarks.agent_throughput --events 100000 --keys 1000 --latency-ms 0 --repeat 5 \\
        --variants c c-app c-agg

(quix) Quix Streams (issue 44, ``benchmarks.quix_peer``): the same keyed work (per key the payload
of the highest version) in RocksDB state with a changelog topic, checkpointed commits, run by a
scratch venv's interpreter (never a dependency of converge) as its own process, its CPU from
``/proc`` of that process, first to last processed event, and (``ckpt``) to the end of the
checkpoint after it; its state is compared with the model of the events. With ``quix`` chosen and
a latency of 0, (c0) and (quix) join the interleaved rounds of that latency and each round prints
(c) and Quix side by side.

    python -m benchmarks.agent_throughput --events 100000 --keys 1000 --latency-ms 0 --repeat 5 \\
        --variants c0 c quix

(cw) The runtime with ``SqliteStore(writer="process")`` (a child process writes the store; its CPU
is counted with the worker's) and ``AgentProcessor(map_ahead=True)``: BENCH_STORE_WRITER=process
and BENCH_MAP_AHEAD=1 of ``bench_apps``.

(c@base) With ``--base DIR`` (a worktree of an earlier commit, e.g. ``git worktree add DIR HEAD~1``),
(c) runs a second time in each round with DIR's code (``PYTHONPATH=DIR``; run the benchmark from
a directory outside both trees, with ``PYTHONPATH`` naming this tree, so that neither is shadowed
by the working directory): a cut measured side by side with the commit before it.

    cd /tmp && PYTHONPATH=/work/main python -m benchmarks.agent_throughput --events 100000 \
        --latency-ms 0 --repeat 5 --variants c quix --base /work/base

With ``--repeat N`` every variant runs N times, interleaved, and the median is
printed (with the range): single runs on 2 shared cores vary by 30 % or more. With (b1) and
(c) both chosen, the ratio of their CPU per event is printed for each round as well.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from benchmarks.calibration import Measured, calibrate, make_records, raw_measured
from benchmarks.quix_peer import QUIX_VENV, quix_run, scratch_venv
from framework.aggregates.tables import tables_of
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker
from stores.sqlite.store import SqliteStore

VARIANTS = ("a", "c0", "b1", "b2", "c", "cw", "c-app", "c-agg", "quix")
#: The environment of (cw): the runtime with its store written by a child process, mapping ahead.
WRITER_PROCESS = {"BENCH_STORE_WRITER": "process", "BENCH_MAP_AHEAD": "1"}
#: The ``bench_apps`` variants a run label names directly (the others run ``keyed``).
VARIANT_APPS = ("plain", "naive", "keyed")


def faust_run(
    variant: str,
    broker: str,
    topic: str,
    n: int,
    latency_ms: float,
    work: Path,
    noop: bool = False,
    env: dict[str, str] | None = None,
) -> tuple[Measured, Path]:
    """One worker of ``bench_apps`` variant ``variant`` over ``n`` events; its figures and data dir."""
    group = f"bench-{variant}-{uuid.uuid4().hex[:6]}"
    data = work / group
    env = {"BENCH_VARIANT": variant, "BENCH_GROUP": group, "BENCH_TOPIC": topic,
           "BENCH_EVENTS": str(n), "BENCH_LATENCY_MS": str(latency_ms),
           "BENCH_NOOP_SINK": "1" if noop else "0", **(env or {})}  # fmt: skip
    proc = start_worker("benchmarks.bench_apps:build", data, broker, env)
    result = data / "bench-result.json"
    deadline = time.monotonic() + 900
    try:
        while not result.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (data / "worker.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{variant} worker failed:\n{tail}")
            time.sleep(0.2)
    finally:
        stop_worker(proc)
    r = json.loads(result.read_text())
    return Measured(r["events"], r["seconds"], r["cpu_s"]), data


def faust_variant(
    variant: str,
    broker: str,
    topic: str,
    n: int,
    latency_ms: float,
    work: Path,
    noop: bool = False,
    env: dict[str, str] | None = None,
) -> float:
    """``faust_run``'s events/s."""
    return faust_run(variant, broker, topic, n, latency_ms, work, noop, env)[0].rate


def expected_totals(records: Sequence[tuple[bytes, bytes]]) -> dict[tuple[str, int], tuple[int, int]]:
    """The model of ``OrgDaily``: per (organisation, UTC day start) the entities whose latest event
    (highest version) falls on that day, and the sum of those events' ``n``."""
    latest: dict[str, dict[str, object]] = {}
    for _, value in records:
        body = json.loads(value)
        seen = latest.get(body["ordering_key"])
        if seen is None or int(str(seen["version"])) < body["version"]:
            latest[body["ordering_key"]] = body
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for key, body in latest.items():
        day = int(str(body["occurred_at"])) // 1_000_000 // 86_400 * 86_400
        group = (key.split(":", 1)[0], day)
        entities, total = out.get(group, (0, 0))
        payload = body["payload"]
        assert isinstance(payload, dict)
        out[group] = (entities + 1, total + int(payload["n"]))
    return out


def expected_rows(records: Sequence[tuple[bytes, bytes]]) -> dict[str, int]:
    """The model of the ``bench`` table: per key, the ``n`` of its latest event (highest version)."""
    latest: dict[str, tuple[int, int]] = {}
    for _, value in records:
        body = json.loads(value)
        key, version = body["ordering_key"], body["version"]
        if key not in latest or latest[key][0] < version:
            latest[key] = (version, body["payload"]["n"])
    return {key: n for key, (_, n) in latest.items()}


def check_rows(data: Path, expected: dict[str, int]) -> None:
    """RuntimeError unless the ``bench`` table of the run in ``data`` equals ``expected`` (and has rows)."""

    async def stored() -> dict[str, int]:
        store = SqliteStore(data / "wide.db")
        try:
            return {str(r.key["k"]): int(str(r.cells["n"].value)) async for r in store.scan("bench")}
        finally:
            await store.close()

    got = asyncio.run(stored())
    if not expected or got != expected:
        wrong = sorted(k for k in got.keys() | expected.keys() if got.get(k) != expected.get(k))
        e_g = [(k, got.get(k), expected.get(k)) for k in wrong[:3]]
        raise RuntimeError(f"(c) rows differ from the model in {len(wrong)} of {len(expected)} keys, "
                           f"e.g. (key, stored, expected): {e_g}")  # fmt: skip


async def stored_totals(path: Path) -> dict[tuple[str, int], tuple[int, int]]:
    """``org_daily``'s totals in the worker's store at ``path``: (entities, n) per (organisation, day)."""
    from benchmarks.bench_apps import OrgDaily

    store = SqliteStore(path)
    out: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        async for row in store.scan(tables_of(OrgDaily()).totals.name):
            if "measures" not in row.cells:
                continue
            (org,) = json.loads(str(row.key["series"]))
            measures = json.loads(str(row.cells["measures"].value))
            out[(org, int(str(row.key["window"])))] = (int(measures["entities"]), int(measures["n"]))
    finally:
        await store.close()
    return out


def check_totals(data: Path, expected: dict[tuple[str, int], tuple[int, int]]) -> None:
    """RuntimeError unless the totals of the run in ``data`` equal ``expected`` (and there are some)."""
    got = asyncio.run(stored_totals(data / "wide.db"))
    if not expected or got != expected:
        wrong = sorted(g for g in got.keys() | expected.keys() if got.get(g) != expected.get(g))
        e_g = [(g, got.get(g), expected.get(g)) for g in wrong[:3]]
        raise RuntimeError(f"c-agg totals differ from the recomputation in {len(wrong)} of "
                           f"{len(expected)} groups, e.g. (group, stored, expected): {e_g}")  # fmt: skip


def _median(values: list[float], fmt: str) -> str:
    if len(values) == 1:
        return f"{values[0]:{fmt}}"
    return f"{statistics.median(values):{fmt}} ({min(values):.0f}-{max(values):.0f})"


def _line(runs: list[Measured]) -> str:
    """Medians (and ranges) of events/s and CPU microseconds per event."""
    rates = _median([r.rate for r in runs], "10.0f")
    return f"{rates} ev/s   CPU {_median([r.cpu_us for r in runs], '5.0f')} us/ev"


def _peer_round(i: int, runs: dict[str, list[Measured]], ckpt: Measured) -> str:
    """Round ``i``'s (c), (c@base), (c0) and Quix figures side by side (the last run of each)."""
    parts = [f"round {i + 1}:"]
    for variant, label in (("keyed", "(c)"), ("writer", "(cw)"), ("base", "(c@base)"), ("noop", "(c0)")):
        if variant in runs:
            m = runs[variant][-1]
            parts.append(f"{label} {m.cpu_us:5.1f} us/ev {m.rate:8.0f} ev/s;")
    q = runs["quix"][-1]
    parts.append(f"(quix) {q.cpu_us:5.1f} us/ev {q.rate:8.0f} ev/s (to checkpoint {ckpt.cpu_us:5.1f} us/ev "
                 f"{ckpt.rate:8.0f} ev/s)")  # fmt: skip
    for variant, label in (("keyed", "c"), ("writer", "cw")):
        if variant in runs:
            m = runs[variant][-1]
            parts.append(f"; {label}/quix CPU {m.cpu_us / q.cpu_us:.2f} ev/s {m.rate / q.rate:.2f}")
    return " ".join(parts)


def main() -> None:

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant; the median is printed")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                    help="the variants to run (default: all)")  # fmt: skip
    ap.add_argument("--calibration-records", type=int, default=200_000)
    ap.add_argument("--quix-venv", type=Path, default=QUIX_VENV, help="the scratch venv of (quix)")
    ap.add_argument("--base", type=Path, help="a tree of an earlier commit: (c) with its code too")
    args = ap.parse_args()
    chosen = set(args.variants)
    if "quix" in chosen:
        args.quix_python = scratch_venv(args.quix_venv)  # before the calibration: pip is no load then
    with tempfile.TemporaryDirectory() as tmp:
        print(calibrate(Path(tmp) / "calibration", args.calibration_records), flush=True)
        with LocalStack(Path(tmp) / "stack") as stack:
            assert stack.info is not None
            run(args, chosen, stack.info.kafka_bootstrap, Path(tmp))


def run(args: argparse.Namespace, chosen: set[str], bootstrap: str, work: Path) -> None:
    """The chosen variants on one stack (``bootstrap``), their figures printed."""
    broker = f"kafka://{bootstrap}"
    topic = "bench-in"
    records = make_records(args.events, args.keys)
    asyncio.run(ensure_topics(broker, {topic: 4}))
    asyncio.run(produce(broker, topic, records))
    print(f"{args.events} events over {args.keys} keys, 4 partitions, one worker per variant, "
          f"{args.repeat} run(s) each")  # fmt: skip
    model = expected_rows(records)
    raw = None
    if "a" in chosen:
        raw = asyncio.run(raw_measured(bootstrap, topic, args.events))
        print(f"(a)  raw aiokafka + JSON decode      {_line([raw])}   (this process)")
    peer = "quix" in chosen and 0.0 in args.latency_ms  # (c0) and (quix) join the rounds at 0 ms
    if "c0" in chosen and not peer:
        c0 = [faust_run("keyed", broker, topic, args.events, 0, work, noop=True)[0]
              for _ in range(args.repeat)]  # fmt: skip
        print(f"(c0) KeyedAgent runtime, no-op sink  {_line(c0)}   (the runtime without the store)")
    labels = {"plain": ("(b1)", "plain Faust agent, no writes   "),
              "naive": ("(b2)", "naive Faust agent, awaits each "),
              "keyed": ("(c)", "KeyedAgent runtime             "),
              "writer": ("(cw)", "runtime, store writer process"),
              "noop": ("(c0)", "KeyedAgent runtime, no-op sink "),
              "quix": ("(quix)", "Quix Streams, RocksDB state  "),
              "base": ("(c@base)", "runtime, the base tree's code")}  # fmt: skip
    ckpt: list[Measured] = []
    for latency in args.latency_ms:
        runs: dict[str, list[Measured]] = {v: [] for v, (lb, _) in labels.items() if lb.strip("()") in chosen}
        runs.pop("noop", None)
        runs.pop("quix", None)
        runs.pop("base", None)
        if args.base is not None and "keyed" in runs:
            runs["base"] = []
        if peer and latency == 0:
            runs.update({"noop": []} if "c0" in chosen else {})
            runs["quix"] = []
        if not runs:
            break
        for i in range(args.repeat):
            for variant, out in runs.items():
                if variant == "quix":
                    one, to_ckpt, version = quix_run(
                        args.quix_python, bootstrap, topic, args.events, work, model
                    )
                    labels["quix"] = ("(quix)", f" Quix Streams {version}, RocksDB".ljust(30))
                    ckpt.append(to_ckpt)
                else:
                    env = {"PYTHONPATH": str(args.base)} if variant == "base" else None
                    env = WRITER_PROCESS if variant == "writer" else env
                    app = variant if variant in VARIANT_APPS else "keyed"
                    one, data = faust_run(app, broker, topic, args.events, latency, work,
                                          noop=variant == "noop", env=env)  # fmt: skip
                    if variant in ("keyed", "base", "writer"):
                        check_rows(data, model)
                out.append(one)
            if "quix" in runs:
                print(_peer_round(i, runs, ckpt[-1]), flush=True)
        print(f"-- sink latency {latency:g} ms per write (SQLite store)")
        for variant, out in runs.items():
            label, text = labels[variant]
            print(f"{label:<5}{text}{_line(out)}")
        if "quix" in runs:
            print(f"{'       to the checkpoint after it':<36}{_line(ckpt)}")
            for variant, label in (("keyed", "c"), ("writer", "cw")):
                if variant in runs:
                    peers = list(zip(runs[variant], runs["quix"], strict=True))
                    cpu_ratios = " ".join(f"{c.cpu_us / q.cpu_us:.2f}" for c, q in peers)
                    rate_ratios = " ".join(f"{c.rate / q.rate:.2f}" for c, q in peers)
                    print(f"     {label}/quix in each round: CPU per event {cpu_ratios}; "
                          f"events/s {rate_ratios}")  # fmt: skip
        if "plain" in runs and "keyed" in runs:  # issue 27: b1/c of at least 1.5 in every round
            pairs = zip(runs["plain"], runs["keyed"], strict=True)
            rounds = " ".join(f"{b.cpu_us / c.cpu_us:.2f}" for b, c in pairs)
            print(f"     CPU per event b1/c in each round: {rounds}")
        if raw is not None and {"plain", "naive", "keyed"} <= runs.keys():
            b1, b2, c = (statistics.median(r.rate for r in runs[v]) for v in ("plain", "naive", "keyed"))
            print(f"     c/a = {c / raw.rate:.2f}   c/b1 = {c / b1:.2f}   c/b2 = {c / b2:.2f}   (medians)")
    pair = {v: app for v, app in (("c-app", "app"), ("c-agg", "app-agg")) if v in chosen}
    if not pair:
        return
    expected = expected_totals(records)
    measured: dict[str, list[Measured]] = {v: [] for v in pair}
    for _ in range(args.repeat):
        for v, app in pair.items():
            m, data = faust_run(app, broker, topic, args.events, 0, work)
            if v == "c-agg":
                check_totals(data, expected)
            measured[v].append(m)
    print("-- one aggregate declared against none (the App's worker, SQLite store, no injected latency)")
    if "c-app" in measured:
        print(f"(c-app) App, no aggregate           {_line(measured['c-app'])}")
    if "c-agg" in measured:
        entities = sum(e for e, _ in expected.values())
        print(f"(c-agg) App, one aggregate          {_line(measured['c-agg'])}   (until every total is "
              f"written; {len(expected)} groups of {entities} entities equal the recomputation)")  # fmt: skip
    if len(measured) == 2:
        rate = {v: statistics.median(r.rate for r in rs) for v, rs in measured.items()}
        cpu = {v: statistics.median(r.cpu_us for r in rs) for v, rs in measured.items()}
        print(f"     c-agg/c-app: events/s {rate['c-agg'] / rate['c-app']:.2f}, "
              f"CPU per event {cpu['c-agg'] / cpu['c-app']:.2f}   (medians)")  # fmt: skip


if __name__ == "__main__":
    main()
