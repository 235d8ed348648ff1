"""Retention of parked events: the ``dlq_retention`` rules, ``expire`` over a real WAL root, and
``converge dlq cleanup --retention``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from framework.core.durations import parse_duration
from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.bucket import BucketView
from framework.dlq.lifecycle import discard
from framework.dlq.retention import DeadLetterRetention, expire
from framework.settings import Settings
from stores.objects.store import ObjectStore
from tests.dlq.support import FakeClock, rec
from tests.dlq.test_offload import _objects

HOUR = 3600.0
OLD, RECENT, NOW = 1_000.0, 9_000.0, 10_000.0  # with orders=1h, OLD is past retention and RECENT is not


# -- the policy ------------------------------------------------------------------------------------


def test_rules_parse_with_parts_left_out_as_any() -> None:
    text = " orders=30d, orders/signup/*/Timeout=12h ,*/*/mapper=forever,billing/x=90"
    policy = DeadLetterRetention.parse(text)
    assert [(r.pattern, r.seconds) for r in policy.rules] == [
        (("orders", "*", "*", "*"), 30 * 86400),
        (("orders", "signup", "*", "Timeout"), 12 * HOUR),
        (("*", "*", "mapper", "*"), None),
        (("billing", "x", "*", "*"), 90),
    ]  # fmt: skip
    assert policy.describe() == (
        "orders/*/*/*=30d, orders/signup/*/Timeout=12h, */*/mapper/*=forever, billing/x/*/*=90;"
        " any other partition kept forever"
    )


@pytest.mark.parametrize("text", [None, "", "  ", "forever", " forever "])
def test_no_rule_keeps_every_partition_forever(text: str | None) -> None:
    policy = DeadLetterRetention.parse(text)
    assert policy.rules == ()
    assert policy.retention(("orders", "signup", "mapper", "E")) is None
    assert policy.describe() == "every partition kept forever"


def test_the_most_specific_matching_rule_wins_part_by_part_from_the_pipeline() -> None:
    text = "*=1d, */*/*/Timeout=2d, orders=3d, orders/*/*/Timeout=4d, orders/signup=forever"
    policy = DeadLetterRetention.parse(text)
    days = {
        ("billing", "invoice", "sink", "Bad"): 1,  # only the catch-all
        ("billing", "invoice", "sink", "Timeout"): 2,
        ("orders", "created", "sink", "Timeout"): 4,  # pipeline and error class beat pipeline alone
        ("orders", "created", "mapper", "Bad"): 3,  # naming the pipeline beats naming the error class
        ("orders", "signup", "sink", "Timeout"): None,  # the event type outranks the error class
    }
    for part, want in days.items():
        got = policy.retention(part)
        assert got == (None if want is None else want * 86400), part
    assert DeadLetterRetention.parse("orders=1d").match(("billing", "a", "b", "c")) is None  # kept forever


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("orders", "expected PATTERN=DURATION"),
        ("orders=", "expected PATTERN=DURATION"),
        ("=30d", "expected PATTERN=DURATION"),
        ("orders=30x", "'30x' is not a duration"),
        ("orders=-1d", "is not a duration"),
        ("orders=0", "longer than 0"),
        ("a/b/c/d/e=1d", "PATTERN is pipeline"),
        ("a//c=1d", "PATTERN is pipeline"),
        ("orders=1d,,billing=2d", "empty rule"),
        ("orders=1d,", "empty rule"),
        ("orders=1d,orders/*=2d", "orders/\\*/\\*/\\* is given twice"),
        ("forever,orders=1d", "expected PATTERN=DURATION"),
    ],
)
def test_bad_rules_are_one_line_errors(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        DeadLetterRetention.parse(text)
    assert "\n" not in str(raised.value)


def test_the_setting_defaults_to_forever_and_a_bad_one_names_its_variable() -> None:
    assert Settings.resolve("app", env={}).dlq_retention == "forever"
    settings = Settings.resolve("app", env={"CONVERGE_DLQ_RETENTION": "orders=30d"})
    assert (
        DeadLetterRetention.parse(settings.dlq_retention).retention(("orders", "a", "b", "c")) == 30 * 86400
    )
    assert settings.as_env()["CONVERGE_DLQ_RETENTION"] == "orders=30d"
    assert "CONVERGE_DLQ_RETENTION" not in Settings.resolve("app", env={}).as_env()
    with pytest.raises(ValueError, match=r"^dlq_retention \(CONVERGE_DLQ_RETENTION\): rule 'orders=soon'"):
        Settings.resolve("app", env={"CONVERGE_DLQ_RETENTION": "orders=soon"})


def test_durations_are_read_in_the_ground_layer() -> None:
    assert parse_duration("2h") == 2 * HOUR
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("2 hours")


# -- expire ----------------------------------------------------------------------------------------


def _park(wal: DeadLetterWAL, error_class: str, n: int, at: float, pipeline: str = "orders") -> None:
    for i in range(n):
        wal.park_sync(rec(i, pipeline=pipeline, error_class=error_class, parked_at=at + i))


def _fill(root: Path, clock: FakeClock) -> DeadLetterWAL:
    """Sealed segments of orders (Sealed, Replayed, Discarded, Damaged, Keep: old; Recent: recent),
    an old one of billing, and an old open one of orders/Open; the WAL is returned open."""
    wal = DeadLetterWAL(root, clock=clock)
    for error_class, n in (("Sealed", 3), ("Replayed", 2), ("Discarded", 2), ("Damaged", 2), ("Keep", 1)):
        _park(wal, error_class, n, OLD)
    _park(wal, "Recent", 2, RECENT)
    _park(wal, "Old", 2, OLD, pipeline="billing")
    wal.rotate_sync(force=True)
    _park(wal, "Open", 1, OLD)
    store = wal.store
    (replayed,) = store.segments(SegmentFilter(error_class="Replayed"))
    assert store.index.set_status(replayed.id, Status.REPLAYED, clock(), Status.SEALED)
    assert discard(store, SegmentFilter(error_class="Discarded")).segments == 1
    (damaged,) = store.segments(SegmentFilter(error_class="Damaged"))
    path = store.abspath(damaged)
    path.write_bytes(path.read_bytes()[:-20])  # the last record cut short
    return wal


def _state(root: Path) -> tuple[list[tuple[str, str]], list[str]]:
    store = DeadLetterStore(root)
    try:
        rows = [(s.partition.error_class, s.status.value) for s in store.segments()]
        files = sorted(p.relative_to(root).as_posix() for p in (root / "segments").rglob("*"))
    finally:
        store.close()
    return rows, files


POLICY = "orders=1h, orders/*/*/Keep=forever"


def test_expire_deletes_what_is_past_retention_and_keeps_open_damaged_recent_and_unmatched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(NOW)
    with _fill(tmp_path, clock) as wal:
        store = wal.store
        before = _state(tmp_path)
        dry = expire(store, DeadLetterRetention.parse(POLICY), dry_run=True)
        assert _state(tmp_path) == before  # a dry run changes nothing
        with caplog.at_level(logging.INFO, logger="framework.dlq"):
            rep = expire(store, DeadLetterRetention.parse(POLICY))
        assert dry == rep
        gone = {"Sealed": Status.SEALED, "Replayed": Status.REPLAYED, "Discarded": Status.DISCARDED}
        assert sorted((e.segment.partition.error_class, e.segment.status) for e in rep.expired) == sorted(
            gone.items()
        )
        assert (rep.segments, rep.records, rep.unreplayed) == (3, 7, 3)
        assert rep.bytes == sum(e.segment.bytes for e in rep.expired) > 0
        assert [h.segment.partition.error_class for h in rep.damaged] == ["Damaged"]
        assert all(e.rule.describe() == "orders/*/*/*=1h" for e in rep.expired)

        left = {s.partition.error_class: s.status for s in store.segments()}
        assert left == {"Damaged": Status.SEALED, "Keep": Status.SEALED, "Recent": Status.SEALED,
                        "Old": Status.SEALED, "Open": Status.OPEN}  # fmt: skip
        for e in rep.expired:
            path = store.abspath(e.segment)
            assert not path.exists() and not path.parent.exists()  # file gone, empty directory pruned
        assert [e.record.offset for e in store.records(SegmentFilter(error_class="Open"))] == [0]

        warned = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1
        said = warned[0].getMessage()
        assert "never replayed: orders/order_created/mapper/Sealed" in said
        assert "3 records (3 never replayed)" in said
        assert sum("retention deleted" in r.getMessage() for r in caplog.records) == 3

        clock.tick(HOUR)  # Recent is past retention now; forever, unmatched and open segments are not
        again = expire(store, DeadLetterRetention.parse(POLICY))
        assert [e.segment.partition.error_class for e in again.expired] == ["Recent"]
        nothing = type(rep)()
        assert (
            expire(store, DeadLetterRetention.parse("forever"))
            == expire(store, DeadLetterRetention())
            == nothing
        )


def test_expire_in_a_claim_deletes_uploaded_segments_objects_and_manifests(
    tmp_path: Path, converge_s3: str
) -> None:
    objects: ObjectStore = _objects(converge_s3)
    try:
        clock = FakeClock(NOW)
        with DeadLetterWAL(tmp_path, clock=clock, objects=objects) as wal:
            _park(wal, "Sealed", 2, OLD)
            _park(wal, "Kept", 1, NOW)
            assert wal.rotate_sync(force=True) == 2  # sealed, uploaded, tracked, forgotten locally
            assert wal.segments() == [] and len(list(objects.list("segments/"))) == 2
        with BucketView(objects, clock=clock) as view:
            with view.claim() as claim:
                rep = expire(claim.store, DeadLetterRetention.parse("*=1h"))
            assert (rep.segments, rep.unreplayed, rep.damaged) == (1, 2, ())  # read back from the bucket
            assert claim.published.removed == 1
        with BucketView(objects, clock=clock) as view:
            assert [s.partition.error_class for s in view.store.segments()] == ["Kept"]
        assert len(list(objects.list("segments/"))) == len(list(objects.list("tracker/"))) == 1
    finally:
        objects.close()
