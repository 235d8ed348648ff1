"""Two runners of one job declaring it at once on a fresh ZooKeeper domain (issue 22, case 11).

A real ZooKeeper: the rival's create is slipped in between the runner's failed ``set`` and its
``create`` (the interleaving that raised ``NodeExistsError``), then many runners race freely.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from framework.coordination.locks import Member
from framework.coordination.zookeeper import ZooKeeperDomainLocks
from framework.jobs import CoordinatorSettings, JobCoordinator
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]


@pytest.fixture()
def root(zookeeper_server: ZooKeeperServer) -> str:
    return f"/converge-test/{uuid.uuid4().hex}/jobs"


@pytest.fixture()
def opened(zookeeper_server: ZooKeeperServer, root: str) -> Iterator[list[ZooKeeperDomainLocks]]:
    made: list[ZooKeeperDomainLocks] = []
    yield made
    for locks in made:
        locks.close()


def _open(server: ZooKeeperServer, root: str, made: list[ZooKeeperDomainLocks]) -> ZooKeeperDomainLocks:
    made.append(ZooKeeperDomainLocks(server.hosts, root=root, session_timeout=5.0))
    return made[-1]


def test_a_rival_creating_the_member_between_set_and_create_is_no_error(
    zookeeper_server: ZooKeeperServer, root: str, opened: list[ZooKeeperDomainLocks]
) -> None:
    runner = _open(zookeeper_server, root, opened)
    rival = _open(zookeeper_server, root, opened)
    member = Member("ingest", None, None)
    real_set = runner._client.set_async
    raced: list[str] = []

    def set_then_rival_creates(path: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        result = real_set(path, data, *args, **kwargs)
        if not raced:
            with pytest.raises(NoNodeError):
                result.get(timeout=5)  # the member does not exist yet: the runner will create it
            rival.declare("orders", member)  # ... but the rival creates it first
            raced.append(path)
        return result

    runner._client.set_async = set_then_rival_creates  # type: ignore[method-assign]
    runner.declare("orders", member)  # raised NodeExistsError before the fix
    assert raced, "the interleaving was not exercised"
    assert runner.status("orders").members == [member]


def test_many_runners_of_one_job_start_on_fresh_domains_without_error(
    zookeeper_server: ZooKeeperServer, root: str, opened: list[ZooKeeperDomainLocks]
) -> None:
    runners = 4
    locks = [_open(zookeeper_server, root, opened) for _ in range(runners)]
    errors: list[BaseException] = []
    started: list[str] = []
    for domain in (f"d{i}" for i in range(15)):
        barrier = threading.Barrier(runners)

        def first_turn(i: int, domain: str = domain, barrier: threading.Barrier = barrier) -> None:
            settings = CoordinatorSettings(domain, "ingest", None, holder=f"runner-{i}")
            coordinator = JobCoordinator(locks[i], settings)
            barrier.wait()
            try:
                turn = coordinator._begin()
                if turn:
                    started.append(domain)
                    coordinator._finish(turn, failed=False)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=first_turn, args=(i,)) for i in range(runners)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert started, "no runner ever got a turn"
