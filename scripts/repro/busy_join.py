"""Reproduction: a second member joining a busy plain Faust app on noida-db is never assigned.

No converge runtime is involved: ``scripts/repro/busy_faust_app.py`` is a plain Faust app
whose four agents take noack batches, wait 20 ms, send four records to ``t4`` and await
them, then ack. One worker consumes 20,000 records in each of t1-t3; a second worker
with the same group starts; after 75 s each worker's partition assignments are printed.
On 2026-11-23 the second worker was never assigned (the first kept its 17 partitions),
while the same join with idle agents (no records) completed within about 2 s.

    PYTHONPATH=.:scripts/repro .venv/bin/python scripts/repro/busy_join.py
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack
from framework.worker_process import start_worker, stop_worker


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="busy-join-"))
    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, dict.fromkeys(("t1", "t2", "t3", "t4"), 4)))
        env = {"PLAIN_GROUP": "busy-join", "PYTHONPATH": f"{Path(__file__).parent}:{Path.cwd()}"}
        first = start_worker("busy_faust_app:build", work / "w1", broker, env)
        time.sleep(10)
        for topic in ("t1", "t2", "t3"):
            asyncio.run(produce(broker, topic, [(b"k%d" % i, b"v") for i in range(20_000)]))
        second = start_worker("busy_faust_app:build", work / "w2", broker, env)
        time.sleep(75)
        for name in ("w1", "w2"):
            log = work / name / "assign.log"
            print(name, log.read_text().strip() if log.exists() else "(never assigned)")
        stop_worker(second)
        stop_worker(first)


if __name__ == "__main__":
    main()
