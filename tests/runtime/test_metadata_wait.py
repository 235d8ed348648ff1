"""The group leader's wait for cluster metadata is bounded, with a real aiokafka client on the
session's noida-db: its metadata task is ended on purpose (as it was found ended after a broker
restart) and a forced update must not hold the wait forever."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiokafka.client import AIOKafkaClient

from framework.local_stack import StackInfo
from framework.runtime.metadata_wait import bound_metadata_wait


async def _client(stack: StackInfo) -> AIOKafkaClient:
    client = AIOKafkaClient(bootstrap_servers=stack.kafka_bootstrap)
    await client.bootstrap()
    return client


async def test_an_ended_metadata_task_is_started_again_and_the_update_arrives(
    stack: StackInfo, caplog: pytest.LogCaptureFixture
) -> None:
    client = await _client(stack)
    try:
        client._sync_task.cancel()
        await asyncio.gather(client._sync_task, return_exceptions=True)
        update = client.force_metadata_update()
        with pytest.raises(TimeoutError):  # aiokafka's own wait: never answered
            await asyncio.wait_for(client._maybe_wait_metadata(), 0.5)
        assert bound_metadata_wait(client, 0.3) and bound_metadata_wait(client, 0.3)
        caplog.set_level(logging.INFO, "framework.runtime.metadata_wait")
        started = time.monotonic()
        await client._maybe_wait_metadata()
        assert time.monotonic() - started < 5
        assert any("metadata task had ended (cancelled)" in r.getMessage() for r in caplog.records)
        assert await asyncio.wait_for(update, 10) is True  # the restarted task delivered it
        assert not client._sync_task.done()
    finally:
        await client.close()


async def test_a_live_task_is_left_alone_and_no_pending_update_returns_at_once(stack: StackInfo) -> None:
    client = await _client(stack)
    try:
        task = client._sync_task
        bound_metadata_wait(client, 5.0)
        await asyncio.wait_for(client.force_metadata_update(), 10)
        started = time.monotonic()
        await client._maybe_wait_metadata()  # nothing pending
        assert time.monotonic() - started < 0.5 and client._sync_task is task
        assert not bound_metadata_wait(object(), 1.0)
    finally:
        await client.close()
