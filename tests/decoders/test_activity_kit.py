"""The activity platform read in each source format (Avro, JSON Schema, Protobuf with the registry
wire format, CloudEvents, CDC) in the test kit: a generated history, delivered shuffled with
duplicates and then replayed, converges to the oracle of its ground truth and to the state of its
envelope form; poison of each format is parked at its stage with its class and the rest goes on."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.schemas import ACTIVITY_HUB, OWNER_ACTIVITY
from examples.activity_platform.generator import generate_history
from framework.decoders.registry_server import RegistryStandIn
from framework.testing import Driver, Snapshot, run_history, snapshot
from tests.agents.replay import divergences
from tests.decoders.activity_compare import expected_of
from tests.decoders.activity_formats import FORMATS, format_app, poison_of, records, register


@pytest.fixture(scope="module")
def registry() -> Iterator[tuple[str, dict[str, int]]]:
    with RegistryStandIn() as server:
        yield server.url, register(server.url)


def _values(snap: Snapshot, table: str) -> dict[Any, dict[str, Any]]:
    return {k: r.values() for k, r in snap.tables[table].items() if r.cells}


@pytest.mark.parametrize("fmt", FORMATS)
# Each example: a small history (its own duplicates, replays and disorder) in the format, delivered
# shuffled with duplicates, then replayed shuffled again; ~1 s each: 4 examples a format.
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])  # fmt: skip
@given(seed=st.integers(0, 2**32), n=st.integers(5, 60), rnd=st.randoms(use_true_random=False))
def test_each_format_converges_to_the_oracle_and_the_envelope_form(
    registry: tuple[str, dict[str, int]], fmt: str, seed: int, n: int, rnd: random.Random
) -> None:
    url, ids = registry
    h = generate_history(seed, n_events=n, n_orgs=2)
    envelope = run_history(format_app("envelope"), list(h.events))
    assert divergences(expected_of(h, "envelope"), envelope) == []
    assert expected_of(h, fmt).hub_rows, "a history writes hub rows"
    items = records(h, fmt, ids)
    assert items, "a history has records"
    shuffled = items + rnd.sample(items, len(items) // 3)
    rnd.shuffle(shuffled)
    with Driver(format_app(fmt, url)) as d:
        assert d.send(shuffled) == []
        first = snapshot(d)
        replay = list(items)
        rnd.shuffle(replay)
        assert d.send(replay) == []
        again = snapshot(d)
    exact = fmt != "cdc"  # a CDC image rewrites the row's unchanged cells at its own version
    assert divergences(expected_of(h, fmt), first, writetimes=exact) == []
    assert divergences(expected_of(h, fmt), again, writetimes=exact) == []
    for table in (ACTIVITY_HUB.name, OWNER_ACTIVITY.name):
        assert _values(first, table) == _values(envelope, table) == _values(again, table)


@pytest.mark.parametrize("fmt", FORMATS)
def test_poison_of_each_format_is_parked_with_stage_and_class(
    registry: tuple[str, dict[str, int]], fmt: str
) -> None:
    url, ids = registry
    poison = poison_of(fmt, ids)
    h = generate_history(5, n_events=30, n_orgs=1)
    good = records(h, fmt, ids)
    with Driver(format_app(fmt, url)) as d:
        parked = d.send([p for p, _ in poison] + good)
        assert [(p.stage, type(p.error).__name__) for p in parked] == [want for _, want in poison]
        assert divergences(expected_of(h, fmt), snapshot(d), writetimes=fmt != "cdc") == []
