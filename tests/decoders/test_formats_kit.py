"""The support desk's ticket changes in Avro, JSON Schema and Protobuf and its priorities in
CloudEvents, in the test kit: each history, delivered shuffled with duplicates and then replayed,
converges to its model, and the registry formats to the state of the same changes in converge's
envelope (the same agent without a decoder)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import App, Event
from framework.decoders import Record
from framework.decoders.registry_server import RegistryStandIn
from framework.testing import Driver
from tests.decoders import registry_app as ra


@pytest.fixture(scope="module")
def ids() -> Iterator[dict[str, int]]:
    with RegistryStandIn() as server:
        before = os.environ.get(ra.REGISTRY_ENV)
        os.environ[ra.REGISTRY_ENV] = server.url
        try:
            yield ra.register_all(server.url)
        finally:
            if before is None:
                os.environ.pop(ra.REGISTRY_ENV, None)
            else:
                os.environ[ra.REGISTRY_ENV] = before


def _table(driver: Driver) -> dict[str, dict[str, Any]]:
    return {str(r.key["ticket_id"]): r.values() for r in driver.rows("ticket") if r.cells}


def _envelope(records: list[Record], fmt: str) -> list[Event]:
    """The registry format's changes as converge's envelope events (decoded once, in order)."""
    decoder = next(a for a in ra.formats_app().agents if a.topic == f"{ra.TOPIC}.{fmt}").decoder
    assert decoder is not None
    return [decoder.decode(r) for r in records]


@pytest.mark.parametrize("fmt", ra.FORMATS)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), rnd=st.randoms(use_true_random=False))
def test_each_format_converges_to_the_model_shuffled_and_replayed(
    ids: dict[str, int], fmt: str, seed: int, rnd: random.Random
) -> None:
    records, truth = ra.history(fmt, ids, seed)
    shuffled = records + rnd.sample(records, len(records) // 3)
    rnd.shuffle(shuffled)
    with Driver(ra.formats_app()) as d:
        assert d.send(shuffled) == []
        assert _table(d) == truth
        replay = list(records)
        rnd.shuffle(replay)
        assert d.send(replay) == []
        assert _table(d) == truth
        decoded = _table(d)
    if fmt != "cloudevents":
        envelope = App("support-desk-envelope", agents=[ra.TicketChanges()])
        with Driver(envelope) as e:
            assert e.send(_envelope(records, fmt)) == []
            assert _table(e) == decoded
