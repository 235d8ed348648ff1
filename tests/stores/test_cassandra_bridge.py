"""The Cassandra store's asyncio bridge and error mapping (no Cassandra server exists here).

No Cassandra server can be installed on this machine. Requests go through
``tests.stores.cassandra_fakes.FakeSession``, which hands out real driver
``ResponseFuture`` objects and completes them from an IO thread with real
protocol messages (e.g. ``WriteTimeoutErrorMessage``), so the driver's own
result handling, retry policy and callbacks decide what the store sees; the
session object around them is the only stand-in. Connection failure is
tested with a real ``Cluster`` against a closed local port.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, OperationTimedOut, WriteType
from cassandra import protocol as p
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionException
from cassandra.policies import RetryPolicy

from framework.core.mutations import CellValue, Upsert
from stores.cassandra import CassandraStore, bridge
from stores.cassandra.url import parse_url
from stores.errors import PermanentStoreError, StoreError, TransientStoreError
from tests.stores.cassandra_fakes import Call, FakeSession, void_result
from tests.stores.harness import hub_schema

K: dict[str, CellValue] = {"org": "acme", "id": 7}
CL = ConsistencyLevel.LOCAL_QUORUM
_TIMEOUT_INFO = {"consistency": CL, "received_responses": 1, "required_responses": 2}


def _up(i: int = 7) -> Upsert:
    return Upsert("hub", {"org": "acme", "id": i}, {"n": i}, 1)


@pytest.fixture()
async def fake() -> AsyncIterator[FakeSession]:
    session = FakeSession({"hub": hub_schema("hub")})
    yield session
    session.shutdown()


async def _store(session: FakeSession, **kw: Any) -> CassandraStore:
    store = CassandraStore(session, "ks", **kw)
    await store.ensure_table(hub_schema("hub"))
    session.calls.clear()
    return store


ERRORS = [
    (p.WriteTimeoutErrorMessage(0x1100, "wt", {**_TIMEOUT_INFO, "write_type": WriteType.SIMPLE}), True),
    (
        p.UnavailableErrorMessage(
            0x1000, "un", {"consistency": CL, "required_replicas": 2, "alive_replicas": 1}
        ),
        True,
    ),
    (p.OverloadedErrorMessage(0x1001, "busy", None), True),
    (p.IsBootstrappingErrorMessage(0x1002, "boot", None), True),
    (p.ServerError(0x0000, "oops", None), True),
    (OperationTimedOut("client timeout"), True),
    (ConnectionException("reset by peer"), True),
    (p.InvalidRequestException(0x2200, "unconfigured table hub", None), False),
    (p.SyntaxException(0x2000, "line 1:0 no viable alternative", None), False),
    (p.UnauthorizedErrorMessage(0x2100, "no MODIFY permission", None), False),
    (p.ConfigurationException(0x2300, "bad keyspace", None), False),
]


@pytest.mark.parametrize(("answer", "transient"), ERRORS, ids=[type(e).__name__ for e, _ in ERRORS])
async def test_driver_errors_become_transient_or_permanent(
    fake: FakeSession, answer: Any, transient: bool
) -> None:
    store = await _store(fake)
    fake.responder = lambda call: answer
    with pytest.raises(TransientStoreError if transient else PermanentStoreError) as info:
        await store.apply([_up()])
    cause = info.value.__cause__
    assert cause is not None and not isinstance(cause, StoreError)
    if isinstance(answer, p.ErrorMessage):  # the driver turned the wire message into its exception
        assert type(cause) is type(answer.to_exception())


async def test_read_timeout_and_a_retried_unavailable_are_transient(fake: FakeSession) -> None:
    store = await _store(fake)
    fake.responder = lambda call: p.ReadTimeoutErrorMessage(
        0x1200, "rt", {**_TIMEOUT_INFO, "data_retrieved": False}
    )
    with pytest.raises(TransientStoreError):
        await store.read_row("hub", K)
    # The driver's default policy retries Unavailable on the next host; with none left: NoHostAvailable.
    fake.retry_policy = RetryPolicy()
    fake.responder = lambda call: p.UnavailableErrorMessage(
        0x1000, "un", {"consistency": CL, "required_replicas": 2, "alive_replicas": 1}
    )
    with pytest.raises(TransientStoreError) as info:
        await store.apply([_up()])
    assert isinstance(info.value.__cause__, NoHostAvailable)


async def test_batch_failures_prefer_permanent_and_every_write_is_attempted(fake: FakeSession) -> None:
    store = await _store(fake)

    def responder(call: Call) -> Any:
        n = call.statement.raw_values[2]
        if n == 1:
            return p.InvalidRequestException(0x2200, "bad", None)
        if n == 2:
            return OperationTimedOut("slow")
        return void_result()

    fake.responder = responder
    with pytest.raises(PermanentStoreError) as info:
        await store.apply([_up(i) for i in range(6)])
    assert len(fake.calls) == 6
    assert any("2 of 6 writes failed" in note for note in info.value.__notes__)


async def test_a_bug_is_not_disguised_as_a_store_error(fake: FakeSession) -> None:
    store = await _store(fake)

    def responder(call: Call) -> Any:
        raise KeyError("bug in a callback path")

    fake.responder = responder
    with pytest.raises(KeyError):
        await store.apply([_up()])


async def test_results_cross_from_the_io_thread_and_concurrency_is_bounded(fake: FakeSession) -> None:
    limit = 3
    gate = threading.Barrier(limit, timeout=10)

    def responder(call: Call) -> Any:
        gate.wait()  # passes only when `limit` requests are in flight at once
        return void_result()

    store = await _store(fake, max_concurrency=limit)
    fake.responder = responder
    await store.apply([_up(i) for i in range(3 * limit)])
    assert len(fake.calls) == 3 * limit and fake.max_in_flight == limit
    assert fake.io_threads and threading.current_thread().name not in fake.io_threads


async def test_a_lost_answer_times_out_as_transient(
    fake: FakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bridge, "GRACE_S", 0.0)
    store = await _store(fake, request_timeout=0.05)
    fake.responder = lambda call: None  # never answers
    with pytest.raises(TransientStoreError, match="no answer"):
        await store.apply([_up()])
    assert fake.calls[0].timeout == 0.05  # the driver's own timeout is passed too


async def test_prepare_is_shared_and_failures_are_not_cached(fake: FakeSession) -> None:
    store = await _store(fake)
    real_prepare = fake.prepare
    failures = [InvalidRequest("table hub does not exist yet")]

    def prepare(query: str, *args: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_prepare(query)

    fake.prepare = prepare  # type: ignore[method-assign,assignment]
    with pytest.raises(PermanentStoreError):
        await store.apply([_up()])
    await asyncio.gather(*(store.apply([_up(i)]) for i in range(8)))
    assert len(fake.prepared) == 1 and len(fake.calls) == 8


async def test_close_shuts_down_only_an_owned_cluster(fake: FakeSession) -> None:
    class Cluster:
        shutdowns = 0

        def shutdown(self) -> None:
            self.shutdowns += 1

    owned, foreign = Cluster(), Cluster()
    fake.cluster.shutdown = foreign.shutdown  # type: ignore[attr-defined]
    store = CassandraStore(fake, "ks", cluster=owned)
    async with store:
        pass
    await store.close()
    assert owned.shutdowns == 1 and foreign.shutdowns == 0
    with pytest.raises(StoreError):
        await store.ensure_table(hub_schema("hub"))
    async with CassandraStore(fake, "ks"):
        pass
    assert foreign.shutdowns == 0


async def test_connect_to_nothing_is_a_transient_failure() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    with pytest.raises(TransientStoreError) as info:
        await CassandraStore.connect(["127.0.0.1"], "ks", port=port, connect_timeout=2.0)
    assert isinstance(info.value.__cause__, NoHostAvailable)


def test_store_urls_name_contact_points_keyspace_and_options() -> None:
    kw = parse_url(
        "cassandra://app:p%40ss@h1:9043,h2/ks_1?consistency=one&protocol_version=5&create_keyspace=true"
        "&replication_factor=3&local_dc=dc1&request_timeout=2.5&max_concurrency=8&max_batch_statements=50"
    )
    auth = kw.pop("auth_provider")
    assert (auth.username, auth.password) == ("app", "p@ss")
    assert kw == {
        "contact_points": ["h1", "h2"],
        "keyspace": "ks_1",
        "port": 9043,
        "consistency": ConsistencyLevel.ONE,
        "protocol_version": 5,
        "create_keyspace": True,
        "replication_factor": 3,
        "local_dc": "dc1",
        "request_timeout": 2.5,
        "max_concurrency": 8,
        "max_batch_statements": 50,
    }
    assert parse_url("cassandra://[::1]:9044/ks") == {
        "contact_points": ["::1"],
        "keyspace": "ks",
        "port": 9044,
    }
    assert parse_url("cassandra://db/ks")["port"] == 9042
    for bad in [
        "sqlite:///x.db",
        "cassandra://db/ks-1",
        "cassandra://db/",
        "cassandra://a:1,b:2/ks",
        "cassandra://db:99999/ks",
        "cassandra://db/ks?consistency=most",
        "cassandra://db/ks?colour=red",
        "cassandra://db/ks?create_keyspace=maybe",
    ]:
        with pytest.raises(ValueError):
            parse_url(bad)


async def test_from_url_connects_with_those_settings() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransientStoreError, match=f"127.0.0.1'\\]:{port}"):
        await CassandraStore.from_url(f"cassandra://127.0.0.1:{port}/ks?protocol_version=4")
