"""One against two workers of the platform app on the embedded stack (one consumer group).

    python -m benchmarks.scale_out 20000 1
    python -m benchmarks.scale_out 20000 2

The workers join and the group settles (``wait_group_settled``) before any event is
produced: noida-db answers an offset commit sent during a rebalance with IllegalGeneration,
which can stall a group whose members join mid-stream (see the runtime's rebalance test).
Figures in BENCHMARKS.md.
"""

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from framework.kafka_admin import ensure_topics, produce, wait_all_drained, wait_group_settled
from framework.local_stack import LocalStack
from framework.worker_process import start_worker, stop_workers

N, W = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp) / "s") as st:
    broker = f"kafka://{st.info.kafka_bootstrap}"
    h = generate_history(7, N)
    topics = list(app.topics())
    asyncio.run(ensure_topics(broker, {t: 4 for t in topics}))
    env = {
        "CONVERGE_WIDE_STORE": f"sqlite:///{tmp}/w.db",
        "CONVERGE_ES_URL": st.info.es_url,
        "CONVERGE_ES_TOMBSTONES": "document",
        "CONVERGE_APP_ID": "two",
    }
    spec = "examples.activity_platform.app:app"
    workers = [start_worker(spec, Path(tmp) / f"w{i}", broker, env) for i in range(W)]
    asyncio.run(wait_group_settled(broker, "two", W, 120))  # all joined before any data
    t0 = time.perf_counter()
    for topic, evs in h.by_topic().items():
        asyncio.run(produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs]))
    ok = asyncio.run(wait_all_drained(broker, "two", topics, 300))
    dt = time.perf_counter() - t0
    print(f"{W} worker(s): {len(h.events)} events drained={ok} in {dt:.1f}s = {len(h.events) / dt:.0f} ev/s")
    stop_workers(workers)
    for i in range(W):
        log = (Path(tmp) / f"w{i}" / "worker.log").read_text()
        print(i, [line[:160] for line in log.splitlines() if "ERROR" in line or "revoked" in line][:4])
