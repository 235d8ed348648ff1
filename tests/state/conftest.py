"""Fixtures of the join tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer

from framework.kafka_admin import ensure_topics
from framework.local_stack import StackInfo
from framework.state.changelog import KafkaChangelog
from tests.state.join_rig import ProducerTopic


@pytest.fixture()
async def changelog(stack: StackInfo) -> AsyncIterator[KafkaChangelog]:
    """The children agent's changelog: a new 2-partition topic on the session's noida-db."""
    broker = f"kafka://{stack.kafka_bootstrap}"
    name = f"join-batch-{uuid.uuid4().hex[:10]}.joins"
    await ensure_topics(broker, {name: 2})
    producer = AIOKafkaProducer(bootstrap_servers=stack.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        yield KafkaChangelog(ProducerTopic(producer, name), broker)
    finally:
        await producer.stop()
