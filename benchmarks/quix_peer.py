"""Quix Streams as a peer of the agent benchmark (issue 44): the same events, broker and keyed work.

``benchmarks.agent_throughput --variants ... quix`` interleaves it with (c), (c0) and the others.
Quix Streams (``QUIX_REQUIREMENT``: librdkafka underneath through confluent-kafka, RocksDB state
with a changelog topic, checkpointed commits) is never a dependency of converge: ``scratch_venv``
makes a venv of its own (default ``QUIX_VENV``, outside the work tree) and installs it there;
``benchmarks/quix_app.py`` runs under that venv's interpreter, as its own process, and measures
its own CPU from ``/proc/self/stat`` from its first processed event to the last (and to the end
of the checkpoint after it). Its RocksDB state is then read back and compared with the model of
the events (``agent_throughput.expected_rows``): a difference fails the benchmark.

    python -m benchmarks.quix_peer --venv /tmp/converge-quix-venv     # make the venv only
    python -m benchmarks.agent_throughput --events 100000 --keys 1000 --latency-ms 0 --repeat 5 \\
        --variants c0 c quix
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from benchmarks.calibration import Measured

#: The Quix Streams release the issue measured (3.28.1 on PyPI when this was written).
QUIX_REQUIREMENT = "quixstreams==3.28.*"
#: The scratch venv's default place: outside the work tree, so nothing of it is committed.
QUIX_VENV = Path(os.environ.get("CONVERGE_QUIX_VENV", "/tmp/converge-quix-venv"))
APP = Path(__file__).with_name("quix_app.py")


def scratch_venv(venv: Path = QUIX_VENV) -> Path:
    """The interpreter of ``venv`` with ``QUIX_REQUIREMENT`` installed (made and installed when missing)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = [
        str(python),
        "-c",
        "import quixstreams, sys; sys.exit(not quixstreams.__version__.startswith('3.28'))",
    ]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", QUIX_REQUIREMENT], check=True)
    return python


def quix_run(
    python: Path, bootstrap: str, topic: str, n: int, work: Path, expected: dict[str, int] | None = None
) -> tuple[Measured, Measured, str]:
    """One Quix app over the ``n`` events of ``topic``: its figures to the last event and to the
    checkpoint after it, and the quixstreams version. With ``expected`` (per key the ``n`` of its
    latest event), RuntimeError unless the app's RocksDB state holds exactly that."""
    group = f"bench-quix-{uuid.uuid4().hex[:6]}"
    data = work / group
    data.mkdir(parents=True)
    out, state = data / "result.json", data / "state.json"
    cmd = [str(python), str(APP), "--broker", bootstrap, "--topic", topic, "--group", group,
           "--events", str(n), "--state-dir", str(data / "state"), "--out", str(out)]  # fmt: skip
    if expected is not None:
        cmd += ["--state-out", str(state)]
    started = time.monotonic()
    with open(data / "quix.log", "wb") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=900)
    if proc.returncode != 0 or not out.exists():
        tail = (data / "quix.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(
            f"quix app failed (exit {proc.returncode}, {time.monotonic() - started:.0f} s):\n{tail}"
        )
    r = json.loads(out.read_text())
    if expected is not None:
        got = {k: int(v[1]) for k, v in json.loads(state.read_text()).items()}
        if not expected or got != expected:
            wrong = sorted(k for k in got.keys() | expected.keys() if got.get(k) != expected.get(k))
            e_g = [(k, got.get(k), expected.get(k)) for k in wrong[:3]]
            raise RuntimeError(f"Quix state differs from the model in {len(wrong)} of {len(expected)} keys, "
                               f"e.g. (key, stored, expected): {e_g}")  # fmt: skip
    return (Measured(r["events"], r["seconds"], r["cpu_s"]),
            Measured(r["events"], r["seconds_ckpt"], r["cpu_s_ckpt"]), r["quixstreams"])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Make the Quix Streams scratch venv (and print its interpreter)."
    )
    ap.add_argument("--venv", type=Path, default=QUIX_VENV)
    print(scratch_venv(ap.parse_args().venv))


if __name__ == "__main__":
    main()
