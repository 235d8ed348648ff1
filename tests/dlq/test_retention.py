"""Retention of parked events: the ``dlq_retention`` rules, ``expire`` over a real WAL root, and
``converge dlq cleanup --retention``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from framework.cli import main
from framework.core.durations import parse_duration
from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.lifecycle import discard
from framework.dlq.offload import delete_stale
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


def test_expire_deletes_an_uploaded_segment_and_the_writer_then_its_object(
    tmp_path: Path, converge_s3: str
) -> None:
    objects: ObjectStore = _objects(converge_s3)
    try:
        clock = FakeClock(NOW)
        with DeadLetterWAL(tmp_path, clock=clock, objects=objects) as wal:
            _park(wal, "Sealed", 2, OLD)
            assert wal.rotate_sync(force=True) == 1  # sealed, uploaded, local copy removed
            (seg,) = wal.segments()
            assert not wal.store.abspath(seg).exists() and len(list(objects.list())) == 1
            rep = expire(wal.store, DeadLetterRetention.parse("*=1h"))
            assert (rep.segments, rep.unreplayed, rep.damaged) == (1, 2, ())  # read back from the bucket
            assert wal.segments() == [] and not wal.store.abspath(seg).exists()
            assert delete_stale(wal.store, objects) == 1
            assert list(objects.list()) == []
    finally:
        objects.close()


# -- the command -----------------------------------------------------------------------------------


def _fill_cli(root: Path) -> None:
    clock = FakeClock(1_700_000_000.0)  # November 2023: years before the test runs
    with DeadLetterWAL(root, clock=clock) as wal:
        for i in range(6):
            clock.tick(60)
            wal.park_sync(rec(i, pipeline="orders" if i < 4 else "billing", error_class=f"E{i % 2}"))


def _classes(root: Path) -> list[tuple[str, str]]:
    store = DeadLetterStore(root)
    try:
        return sorted((s.partition.pipeline, s.partition.error_class) for s in store.segments())
    finally:
        store.close()


def test_cleanup_applies_the_retention_of_the_flag_or_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "wal"
    _fill_cli(root)
    monkeypatch.delenv("CONVERGE_DLQ_RETENTION", raising=False)
    everything = [("billing", "E0"), ("billing", "E1"), ("orders", "E0"), ("orders", "E1")]

    assert main(["dlq", "cleanup", "--root", str(root)]) == 0  # the default: forever
    out = capsys.readouterr().out
    assert "deleted 0 segments past their retention" in out and "every partition kept forever" in out
    assert _classes(root) == everything

    assert main(["dlq", "cleanup", "--root", str(root), "--retention", "orders=30d", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 2 segments past their retention (4 records, 4 of them never replayed;" in out
    line = "orders/order_created/mapper/E0: 1 segments, 2 records (2 never replayed) (rule orders/*/*/*=30d)"
    assert line in out
    assert "would delete 0 replayed/discarded segments past the grace period" in out
    assert _classes(root) == everything

    monkeypatch.setenv("CONVERGE_DLQ_RETENTION", "orders/*/*/E1=12h")
    assert main(["dlq", "cleanup", "--root", str(root)]) == 0
    assert "deleted 1 segments past their retention (2 records" in capsys.readouterr().out
    assert _classes(root) == [("billing", "E0"), ("billing", "E1"), ("orders", "E0")]

    assert main(["dlq", "cleanup", "--root", str(root), "--retention", "forever"]) == 0  # the flag wins
    assert _classes(root) == [("billing", "E0"), ("billing", "E1"), ("orders", "E0")]
    capsys.readouterr()

    monkeypatch.setenv("CONVERGE_DLQ_RETENTION", "orders=soon")
    assert main(["dlq", "cleanup", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    said = "converge dlq cleanup: error: dlq_retention (CONVERGE_DLQ_RETENTION): rule 'orders=soon'"
    assert err.startswith(said)
    assert err.count("\n") == 1
    with pytest.raises(SystemExit) as usage:
        main(["dlq", "cleanup", "--root", str(root), "--retention", "orders"])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert "argument --retention: rule 'orders': expected PATTERN=DURATION" in err and err.count("\n") == 1
    assert _classes(root) == [("billing", "E0"), ("billing", "E1"), ("orders", "E0")]
