"""A consumer group member the workers cannot tell is dead: a plain aiokafka consumer in its own
process, named ``outsider`` (not ``converge-<host>-<pid>``), killed with SIGKILL by the test.

noida-db keeps such a member for ever; its long rebalance timeout holds every later JoinGroup.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence

from framework.kafka_admin import wait_group_settled
from framework.local_stack import die_with_parent
from framework.worker.processes import kill_worker

__all__ = ["leave_a_dead_outsider"]

_SCRIPT = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer
async def main():
    c = AIOKafkaConsumer(*sys.argv[3:], bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                         client_id="outsider", rebalance_timeout_ms=600000, session_timeout_ms=300000)
    await c.start()
    while True:
        await c.getmany(timeout_ms=200)
asyncio.run(main())
"""


def leave_a_dead_outsider(bootstrap: str, group: str, topics: Sequence[str], timeout: float = 30.0) -> None:
    """Make ``group`` hold a member killed with SIGKILL once it held the partitions of ``topics``."""
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, bootstrap, group, *topics],
                            preexec_fn=die_with_parent)  # noqa: PLW1509 # fmt: skip
    try:
        asyncio.run(wait_group_settled(f"kafka://{bootstrap}", group, 1, timeout))
    finally:
        kill_worker(proc)
