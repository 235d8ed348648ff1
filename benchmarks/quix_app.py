"""The Quix Streams peer of the agent benchmark's (c): run by the scratch venv's interpreter only.

Not part of converge's import graph: ``benchmarks.quix_peer`` starts it as
``<scratch venv>/bin/python benchmarks/quix_app.py ARGS`` (quixstreams, confluent-kafka and
rocksdict live in that venv, never in the project's). Standard library and quixstreams only.

The work is (c)'s: per key, keep the payload of the event with the highest version, in RocksDB
state (``sdf.update(..., stateful=True)``, changelog topic on, at-least-once, checkpointed
commits every ``--commit-interval`` s as Quix's default 5 s).

Figures, written as JSON to ``--out``: this process's CPU seconds (utime + stime of
``/proc/self/stat``) and the wall time from the first processed event to the ``--events``-th
(``seconds``, ``cpu_s``: the issue's definition), and to the end of the forced checkpoint that
follows it (``seconds_ckpt``, ``cpu_s_ckpt``: the state flushed to RocksDB, its changelog
produced and the offsets committed, i.e. durable as (c)'s store write is). Then the state: per
key its stored version and ``n`` (``--state-out``), read back from RocksDB through the
partition's transaction API, for the orchestrator to compare with the model.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float:
    raw = Path("/proc/self/stat").read_text()
    fields = raw.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def keep_latest(value: dict[str, Any], state: Any) -> None:
    """(c)'s mapping: the payload of the highest version per key (a replayed older event is ignored)."""
    seen = state.get("latest")
    if seen is None or seen["version"] < value["version"]:
        payload = value["payload"]
        state.set("latest", {"version": value["version"], "n": payload["n"], "body": payload["body"]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--state-out")
    ap.add_argument("--commit-interval", type=float, default=5.0)
    ap.add_argument("--linger", type=float, default=0.0, help="seconds to stay alive after --out (profiling)")
    args = ap.parse_args()

    import quixstreams
    from quixstreams import Application

    app = Application(
        broker_address=args.broker,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        commit_interval=args.commit_interval,
        loglevel="WARNING",
    )
    topic = app.topic(args.topic, value_deserializer="json", key_deserializer="str")
    sdf = app.dataframe(topic)
    sdf.update(keep_latest, stateful=True)

    mark: dict[str, float] = {}
    seen = [0]

    def processed(topic_name: str, partition: int, offset: int) -> None:
        if seen[0] == 0:
            mark["t0"], mark["c0"] = time.perf_counter(), cpu_seconds()
        seen[0] += 1
        if seen[0] == args.events:
            mark["t1"], mark["c1"] = time.perf_counter(), cpu_seconds()
            app.stop()

    app._on_message_processed = processed  # noqa: SLF001 - the per-message hook, set after build
    context = app._processing_context  # noqa: SLF001
    commit = context.commit_checkpoint

    def commit_checkpoint(force: bool = False, revoking: bool = False) -> None:
        commit(force=force, revoking=revoking)
        if force and "t1" in mark and "t2" not in mark:
            mark["t2"], mark["c2"] = time.perf_counter(), cpu_seconds()
            Path(args.out + ".ckpt").touch()  # for the profiler: the work is done and durable

    context.commit_checkpoint = commit_checkpoint
    app.run()
    Path(args.out).write_text(json.dumps({
        "events": seen[0], "seconds": mark["t1"] - mark["t0"], "cpu_s": mark["c1"] - mark["c0"],
        "seconds_ckpt": mark["t2"] - mark["t0"], "cpu_s_ckpt": mark["c2"] - mark["c0"],
        "quixstreams": quixstreams.__version__,
    }))  # fmt: skip
    if args.state_out:
        Path(args.state_out).write_text(json.dumps(read_state(app, args.topic)))
    time.sleep(args.linger)


def read_state(app: Any, topic: str) -> dict[str, list[int]]:
    """Per key ``[version, n]`` as RocksDB holds it after the run (each partition reopened)."""
    from rocksdict import AccessType, Rdict

    out: dict[str, list[int]] = {}
    root = Path(app._config.state_dir)  # noqa: SLF001
    for part in root.rglob("CURRENT"):
        db = Rdict(str(part.parent), access_type=AccessType.read_only())
        try:
            for key, value in db.items():
                if not isinstance(key, bytes | str) or not isinstance(value, bytes):
                    continue
                raw = key if isinstance(key, bytes) else key.encode()
                if not raw.endswith(b'"latest"'):
                    continue
                body = json.loads(value)
                prefix = raw[: -len(b'"latest"')].rstrip(b"|")  # the message key, JSON-serialized
                out[json.loads(prefix)] = [body["version"], body["n"]]
        finally:
            db.close()
    return out


if __name__ == "__main__":
    main()
