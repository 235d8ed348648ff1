"""noida-db's CPU per thread name for the same records produced at once or as a trickle.

    python -m benchmarks.broker_autosave --records 110000 --pauses 0 0.5

For each pause, a fresh embedded stack takes ``--records`` JSON records (about 320 bytes) in
produce calls of 1,000 with the pause after each, then 5 s of quiet; prints the CPU seconds of
noida-db's threads, by name, over that time (``benchmarks.profile_demo`` reads them the same way).
Shows whether the broker's ``autosave`` thread costs per record or per second of writing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from benchmarks.proc_cpu import cpu_by_comm
from benchmarks.profile_demo import _broker_pid
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack


def run(records: list[tuple[bytes, bytes]], pause: float) -> tuple[float, dict[str, float]]:
    """Wall seconds and noida-db's CPU seconds by thread name for one pace."""
    with (
        tempfile.TemporaryDirectory(prefix="converge-autosave-") as work,
        LocalStack(Path(work) / "stack") as stack,
    ):
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {"autosave": 4}))
        pid = _broker_pid()
        before, started = cpu_by_comm(pid), time.time()
        for i in range(0, len(records), 1_000):
            asyncio.run(produce(broker, "autosave", records[i : i + 1_000]))
            time.sleep(pause)
        time.sleep(5.0)
        after = cpu_by_comm(pid)
    return time.time() - started, {k: v - before.get(k, 0.0) for k, v in after.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=110_000)
    ap.add_argument("--pauses", type=float, nargs="+", default=[0.0, 0.5], help="seconds after each 1,000")
    args = ap.parse_args()
    records = [
        (f"k{i % 1000}".encode(), json.dumps({"i": i, "pad": "x" * 300}).encode())
        for i in range(args.records)
    ]
    for pause in args.pauses:
        seconds, cpu = run(records, pause)
        threads = ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 0.01
        )
        print(
            f"pause {pause:.2f} s per 1,000 records: {seconds:.0f} s; noida-db CPU s: {threads}", flush=True
        )


if __name__ == "__main__":
    main()
