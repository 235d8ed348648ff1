"""Partition labels from event data become safe, distinct directory names; records round-trip exactly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.dlq import DeadLetterWAL, ParkedRecord, Partition
from framework.dlq.names import MAX_COMPONENT, partition_dir, sanitise
from framework.dlq.record import record_from_json, record_to_json
from tests.dlq.support import FakeClock, rec

HOSTILE = [
    "../../etc", "..", ".", "", "a/b", "a\\b", "/abs", "nul\x00byte", "new\nline", "\x1b[31mred",
    "x" * 5000, "événement-😀", "CON", "~tilde", "a b", "ok_name", "a_b", "..hidden", "-rf",
    "lone\udcffsurrogate",
]  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE)
def test_sanitised_component_is_one_safe_path_part(name: str) -> None:
    """No separators, no dot-names, no control characters, bounded length."""
    out = sanitise(name)
    assert out and len(out) <= MAX_COMPONENT
    assert "/" not in out and "\\" not in out and "\x00" not in out
    assert out not in (".", "..") and not out.startswith(".")
    assert all(c.isascii() and c.isprintable() and c != " " for c in out)


def test_safe_names_are_kept_and_altered_names_stay_distinct() -> None:
    assert sanitise("order_created") == "order_created"
    assert sanitise("ValidationError") == "ValidationError"
    # "a/b", "a\\b", "a b" and "a_b" would all collapse to "a_b" without the hash suffix.
    outs = {sanitise(n) for n in ["a/b", "a\\b", "a b", "a_b", "a_b~", "x" * 5000, "x" * 5001]}
    assert len(outs) == 7


@given(st.text(max_size=200), st.text(max_size=200))
def test_distinct_labels_never_share_a_directory(a: str, b: str) -> None:
    if a != b:
        assert sanitise(a) != sanitise(b)


def test_hostile_partitions_stay_inside_the_wal_directory(tmp_path: Path) -> None:
    """Every file the WAL creates for hostile labels lies under its root, and they read back intact."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "wal"
    clock = FakeClock()
    parked = []
    with DeadLetterWAL(root, clock=clock) as wal:
        for i, name in enumerate(HOSTILE):
            r = rec(i, pipeline=name, event_type=name, stage=name, error_class=name)
            wal.park_sync(r)
            parked.append(r)
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        for n in dirnames + filenames:
            p = Path(dirpath, n)
            assert not p.is_symlink()
            if p.resolve() != real_root and real_root not in p.resolve().parents:
                assert p == outside, f"{p} escaped the WAL root"
    assert list(outside.iterdir()) == []
    with DeadLetterWAL(root, clock=clock) as wal:
        got = sorted((e.record for e in wal.iterate()), key=lambda r: r.offset)
    assert [r.parked_at for r in got] == [clock.now] * len(HOSTILE)
    assert got == [ParkedRecord(**{**vars(r), "parked_at": clock.now}) for r in parked]


def test_partition_dir_is_four_levels_below_the_segments_root(tmp_path: Path) -> None:
    d = partition_dir(tmp_path, Partition("..", "../..", "/", "a/../../b"))
    assert d.parent.parent.parent.parent == tmp_path.resolve()


_bytes = st.none() | st.binary(max_size=300)


@given(
    st.builds(
        ParkedRecord,
        pipeline=st.text(),
        topic=st.text(),
        partition=st.integers(0, 2**31),
        offset=st.integers(0, 2**62),
        key=_bytes,
        value=_bytes,
        stage=st.text(),
        error_class=st.text(),
        error=st.text(max_size=500),
        parked_at=st.floats(allow_nan=False, allow_infinity=False),
        event_type=st.text(),
    )  # fmt: skip
)
@settings(max_examples=200)
def test_record_json_round_trip_is_exact(r: ParkedRecord) -> None:
    assert record_from_json(record_to_json(r, lsn=7)) == r


def test_record_validation_rejects_what_cannot_be_stored_faithfully() -> None:
    with pytest.raises(TypeError):
        rec(1, key="text-not-bytes").validate()  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rec(1, parked_at=float("nan")).validate()
    with pytest.raises(ValueError):
        record_from_json({**record_to_json(rec(1)), "value": "not base64!"})
