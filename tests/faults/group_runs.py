"""Workers of one example app in one consumer group on a noida-db of the test's own, for the group
faults (``test_only_worker_restart``, ``test_stop_in_rebalance``): start them, read the group from
the broker, feed a topic so that the workers commit all the time."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import threading
import time
import uuid
from pathlib import Path

from framework.kafka_admin import GroupMember, GroupReader, ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack
from framework.runtime.group_watch import member_client_id
from framework.worker.processes import start_worker

__all__ = ["APPS", "GroupRun"]

#: The example apps, by the module that declares ``app``.
APPS = ("examples.support_desk.app", "examples.activity_platform.app")


class GroupRun:
    """Workers of ``module``'s app with the data dirs ``work/<name>``, one SQLite store, a group of
    their own and every topic of the app with ``partitions`` partitions."""

    def __init__(self, stack: LocalStack, work: Path, module: str, partitions: int = 2) -> None:
        assert stack.info is not None
        self.spec, self.work = f"{module}:app", work
        self.broker = f"kafka://{stack.info.kafka_bootstrap}"
        self.group = f"{module.split('.')[1]}-{uuid.uuid4().hex[:8]}"
        self.topics = list(importlib.import_module(module).app.topics())
        self.partitions = partitions
        self.env = {
            "CONVERGE_ES_URL": stack.info.es_url,
            "CONVERGE_APP_ID": self.group,
            "CONVERGE_WIDE_STORE": f"sqlite:///{(work / 'wide.db').resolve()}",
            "CONVERGE_PARTITIONS": str(partitions),
            "CONVERGE_LOGLEVEL": "info",  # the logs name every join and leave
            "PYTHONUNBUFFERED": "1",  # as soon as they happen
        }
        asyncio.run(ensure_topics(self.broker, dict.fromkeys(self.topics, partitions)))
        self._feeding = threading.Event()
        self._feeder: threading.Thread | None = None
        self.fed = 0

    def start(self, name: str) -> subprocess.Popen[bytes]:
        """A worker with data dir ``work/<name>`` (its log: ``worker.log`` there)."""
        return start_worker(self.spec, self.work / name, self.broker, self.env)

    def log(self, name: str, tail: int = 4000) -> str:
        return (self.work / name / "worker.log").read_text(errors="replace")[-tail:]

    def members(self) -> tuple[str, tuple[GroupMember, ...]]:
        """The group's state and members as the broker describes them now."""

        async def read() -> tuple[str, tuple[GroupMember, ...]]:
            reader = GroupReader(self.broker, self.group)
            try:
                return await reader.members()
            finally:
                await reader.close()

        return asyncio.run(read())

    def wait_rebalance(self, joining: str, deadline: float) -> str:
        """Wait until a rebalance starts: the group leaves Stable or worker ``joining`` logs that
        it sends its JoinGroup (a rebalance of noida-db may last a few ms: a poll of the group
        alone misses some); the state the group was last seen in."""
        log = self.work / joining / "worker.log"

        async def poll() -> str:
            reader = GroupReader(self.broker, self.group)  # one connection, read every 20 ms
            try:
                while True:
                    state = (await reader.members())[0]
                    if state != "Stable" or "(Re-)joining group" in log.read_text(errors="replace"):
                        return state
                    assert time.monotonic() < deadline, f"no rebalance of group {self.group} began"
                    await asyncio.sleep(0.02)
            finally:
                await reader.close()

        return asyncio.run(poll())

    @staticmethod
    def members_of(proc: subprocess.Popen[bytes], members: tuple[GroupMember, ...]) -> list[str]:
        """The member ids of worker ``proc`` (its consumer's client id names its pid)."""
        return [m.member_id for m in members if m.client_id == member_client_id(pid=proc.pid)]

    def wait_sole_owner(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        """Wait (until ``time.monotonic()`` passes ``deadline``) until the group is Stable with
        ``proc`` as its only member, holding every partition of every topic of the app."""
        everything = {t: list(range(self.partitions)) for t in self.topics}
        while True:
            state, members = self.members()
            if (
                state == "Stable"
                and len(members) == 1
                and self.members_of(proc, members)
                and all(members[0].holds.get(t) == p for t, p in everything.items())
            ):
                return
            assert proc.poll() is None, f"the worker exited ({proc.returncode})"
            if time.monotonic() >= deadline:
                seen = [(m.client_id, sum(map(len, m.holds.values()))) for m in members]
                raise AssertionError(f"group {self.group}: {state}, members {seen}, not {proc.pid} alone")
            time.sleep(0.1)

    def mark_and_wait_committed(self, deadline: float) -> bool:
        """Produce records to every partition of the app's first topic and wait (until
        ``deadline``) for the group to commit past them: every partition is consumed and
        committing. The records are not events: the workers park them and go on."""
        topic = self.topics[0]
        marks = [(f"mark-{uuid.uuid4().hex}".encode(), b"{") for _ in range(16)]
        asyncio.run(produce(self.broker, topic, marks))
        left = max(0.1, deadline - time.monotonic())
        return asyncio.run(wait_drained(self.broker, self.group, topic, left, 0.1))

    def feed(self) -> None:
        """Produce a few hundred records a second to the app's first topic until ``stop_feeding``:
        the workers commit all the time, so a rebalance answers their commits IllegalGeneration."""

        def run() -> None:
            while not self._feeding.is_set():
                batch = [(f"feed-{self.fed + i}".encode(), b"{") for i in range(40)]
                asyncio.run(produce(self.broker, self.topics[0], batch))
                self.fed += len(batch)
                time.sleep(0.1)

        self._feeder = threading.Thread(target=run, daemon=True)
        self._feeder.start()

    def stop_feeding(self) -> None:
        self._feeding.set()
        if self._feeder is not None:
            self._feeder.join(10)
