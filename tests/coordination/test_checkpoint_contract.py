"""One contract for every checkpoint backend: SQLite and a real ZooKeeper.

Each test runs once per backend (the ``backend`` fixture is parametrised).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.coordination.checkpoints import (
    MAX_VALUE_BYTES,
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    CheckpointStore,
)


async def test_missing_checkpoint_reads_none(checkpoints: CheckpointStore) -> None:
    assert await checkpoints.get("verifier/ledger") is None


async def test_create_then_update_bumps_the_version(checkpoints: CheckpointStore) -> None:
    created = await checkpoints.compare_and_set("verifier/ledger", "100", None)
    assert created == Checkpoint("verifier/ledger", "100", 0)
    updated = await checkpoints.compare_and_set("verifier/ledger", "200", 0)
    assert updated == Checkpoint("verifier/ledger", "200", 1)
    assert await checkpoints.get("verifier/ledger") == updated


async def test_create_over_an_existing_checkpoint_conflicts(checkpoints: CheckpointStore) -> None:
    await checkpoints.compare_and_set("c", "first", None)
    with pytest.raises(CheckpointConflict) as info:
        await checkpoints.compare_and_set("c", "second", None)
    assert (info.value.expected, info.value.actual) == (None, 0)
    assert await checkpoints.get("c") == Checkpoint("c", "first", 0)


async def test_stale_version_conflicts_and_changes_nothing(checkpoints: CheckpointStore) -> None:
    await checkpoints.compare_and_set("c", "a", None)
    await checkpoints.compare_and_set("c", "b", 0)
    with pytest.raises(CheckpointConflict) as info:
        await checkpoints.compare_and_set("c", "stale", 0)
    assert (info.value.expected, info.value.actual) == (0, 1)
    assert await checkpoints.get("c") == Checkpoint("c", "b", 1)


async def test_update_of_a_missing_checkpoint_conflicts(checkpoints: CheckpointStore) -> None:
    with pytest.raises(CheckpointConflict) as info:
        await checkpoints.compare_and_set("absent", "x", 3)
    assert info.value.actual is None
    assert await checkpoints.get("absent") is None


async def test_names_are_independent_including_nested_ones(checkpoints: CheckpointStore) -> None:
    await checkpoints.compare_and_set("a/b", "nested", None)
    assert await checkpoints.get("a") is None
    await checkpoints.compare_and_set("a", "parent", None)
    await checkpoints.compare_and_set("a_b", "flat", None)
    assert [await checkpoints.get(n) for n in ("a", "a/b", "a_b")] == [
        Checkpoint("a", "parent", 0),
        Checkpoint("a/b", "nested", 0),
        Checkpoint("a_b", "flat", 0),
    ]


async def test_values_round_trip_unicode_and_empty(checkpoints: CheckpointStore) -> None:
    await checkpoints.compare_and_set("u", "Grüße ✓", None)
    await checkpoints.compare_and_set("e", "", None)
    assert (await checkpoints.get("u")).value == "Grüße ✓"  # type: ignore[union-attr]
    assert (await checkpoints.get("e")).value == ""  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name", ["", "/a", "a/", "a//b", "a/../b", ".", "a b", "x" * 300, 7, "é", "a\n", "a\n/b", "a/b\n"]
)
async def test_bad_names_are_typed_errors(checkpoints: CheckpointStore, name: object) -> None:
    with pytest.raises(CheckpointError):
        await checkpoints.get(name)  # type: ignore[arg-type]
    with pytest.raises(CheckpointError):
        await checkpoints.compare_and_set(name, "v", None)  # type: ignore[arg-type]


async def test_bad_values_and_versions_are_typed_errors(checkpoints: CheckpointStore) -> None:
    with pytest.raises(CheckpointError):
        await checkpoints.compare_and_set("c", "x" * (MAX_VALUE_BYTES + 1), None)
    with pytest.raises(CheckpointError):
        await checkpoints.compare_and_set("c", b"bytes", None)  # type: ignore[arg-type]
    for bad in (-1, True, "0", 1.0):
        with pytest.raises(CheckpointError):
            await checkpoints.compare_and_set("c", "v", bad)  # type: ignore[arg-type]
    assert await checkpoints.get("c") is None


async def test_another_connection_sees_writes_and_is_fenced(
    checkpoints: CheckpointStore, reopen: Callable[[], CheckpointStore]
) -> None:
    other = reopen()
    await checkpoints.compare_and_set("shared", "1", None)
    seen = await other.get("shared")
    assert seen == Checkpoint("shared", "1", 0)
    await other.compare_and_set("shared", "2", seen.version)  # type: ignore[union-attr]
    with pytest.raises(CheckpointConflict):
        await checkpoints.compare_and_set("shared", "lost", 0)
    assert await checkpoints.get("shared") == Checkpoint("shared", "2", 1)


async def test_racing_writers_exactly_one_wins_each_round(
    checkpoints: CheckpointStore, reopen: Callable[[], CheckpointStore]
) -> None:
    stores = [checkpoints, reopen(), reopen()]
    await checkpoints.compare_and_set("race", "start", None)
    for round_ in range(3):
        results = await asyncio.gather(
            *(s.compare_and_set("race", f"r{round_}-w{i}", round_) for i, s in enumerate(stores)),
            return_exceptions=True,
        )
        winners = [r for r in results if isinstance(r, Checkpoint)]
        assert len(winners) == 1, results
        assert all(isinstance(r, CheckpointConflict) for r in results if r not in winners)
        assert await checkpoints.get("race") == winners[0]
        assert winners[0].version == round_ + 1


# An operation: (name index, value, how to pick the expected version).
_ops = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.text(max_size=8),
        st.one_of(st.sampled_from(["current", "absent"]), st.integers(0, 4)),
    ),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_any_operation_sequence_matches_the_model(checkpoints: CheckpointStore, ops: list) -> None:
    """Whatever the sequence of writes, the store behaves like a dict of (value, version) with CAS."""
    prefix = f"p{uuid.uuid4().hex[:12]}"

    async def run() -> None:
        model: dict[str, tuple[str, int]] = {}
        for idx, value, how in ops:
            name = f"{prefix}/n{idx}"
            current = model.get(name)
            if how == "current":
                expected = None if current is None else current[1]
            elif how == "absent":
                expected = None
            else:
                expected = how
            actual = None if current is None else current[1]
            if expected == actual:
                result = await checkpoints.compare_and_set(name, value, expected)
                model[name] = (value, 0 if expected is None else expected + 1)
                assert result == Checkpoint(name, *model[name])
            else:
                with pytest.raises(CheckpointConflict):
                    await checkpoints.compare_and_set(name, value, expected)
        for idx in range(3):
            name = f"{prefix}/n{idx}"
            got = await checkpoints.get(name)
            want = model.get(name)
            assert (None if got is None else (got.value, got.version)) == want

    asyncio.run(run())
