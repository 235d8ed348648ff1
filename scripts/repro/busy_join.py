"""Reproduction: a second member joining a busy plain Faust app on noida-db is not assigned.

No converge runtime is involved: ``scripts/repro/busy_faust_app.py`` is a plain Faust app
whose four agents take noack batches, wait 20 ms, send four records to ``t4`` and await
them, then ack. One worker consumes 20,000 records in each of t1-t3; a second worker
with the same group starts; after 75 s each worker's partition assignments and the group
(state, members, partitions each holds) are printed.

What it shows (2026-11-23, again twice on 2026-11-26): the second worker is never assigned;
the first keeps its 17 partitions and logs ``OffsetCommit failed ... IllegalGenerationError
..., will rejoin`` (28 and 24 times); at the end of the second run the group was in
CompletingRebalance with 3 members for the 2 workers, none holding a partition. The same
join with idle agents completed within about 2 s (2026-11-23). noida-db answers a commit
sent during the rebalance with IllegalGeneration, plain aiokafka then forgets its member id
and joins again as a new member, and noida-db keeps the forgotten one, so the rebalance
waits for a member that never joins.

Workers of the converge runtime do not stall this way: their binding installs
``framework/runtime/group_rejoin.py`` (rejoin under the member id the broker counts, and
LeaveGroup for any id given up) and the group watch (``group_watch.py``) removes members of
dead processes; ``tests/faults/test_rebalance.py`` scales the reference app 1 -> 2 -> 3 ->
2 -> 1 workers mid-stream and ``benchmarks/scale_out.py`` times those rebalances. This
script keeps the plain app to show the broker behaviour those two modules work around.

    PYTHONPATH=.:scripts/repro .venv/bin/python scripts/repro/busy_join.py
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from framework.kafka_admin import ensure_topics, group_assignments, produce
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker


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
        state, held = asyncio.run(group_assignments(broker, "busy-join"))
        counts = [sum(map(len, h.values())) for h in held]
        print(f"group: {state}, {len(held)} members holding {counts} partitions")
        stop_worker(second)
        stop_worker(first)


if __name__ == "__main__":
    main()
