"""``notification_mutations``: one entry per (tenant, bucket, table) of a batch, pure and bounded."""

from __future__ import annotations

import json

import pytest

from framework.core.mutations import Delete, LogState, Upsert
from framework.notifications import (
    BUCKETS_TABLE,
    NOTIFICATION_TABLE,
    bucket_of,
    notification_mutations,
)
from framework.notifications import entries as entries_module
from framework.notifications.entries import _jsonable, decode_keys, encode_keys, key_ident

T0 = 1_700_000_000_000_000  # an ingestion time, microseconds
HOUR = 3_600_000_000


def entries(mutations: list) -> dict[tuple[str, str], dict]:
    """The notification rows, by (tenant, table): key and cells."""
    out = {}
    for m in mutations:
        if m.table == NOTIFICATION_TABLE.name:
            out[(m.key["tenant"], m.key["table_name"])] = {**m.key, **m.cells}
    return out


def test_one_entry_per_tenant_and_table_with_counts_and_keys() -> None:
    written = [
        Upsert("emails", {"org_id": "o1", "id": "a"}, {"s": "x"}, 10),
        Upsert("emails", {"org_id": "o1", "id": "a"}, {"s": "y"}, 12),  # same row twice: counted once
        Upsert("emails", {"org_id": "o1", "id": "b"}, {"s": "x"}, 11),
        Delete("emails", {"org_id": "o1", "id": "c"}, 13),
        Upsert("emails", {"org_id": "o2", "id": "a"}, {"s": "x"}, 9),
        LogState("email_states", {"org_id": "o1", "id": "a"}, "sent", at=5, event_id="e1", version=10),
    ]
    out = notification_mutations("app", "b1", written, None, T0)
    got = entries(out)
    assert set(got) == {("o1", "emails"), ("o2", "emails"), ("o1", "email_states")}
    o1 = got[("o1", "emails")]
    assert (o1["inserted"], o1["updated"], o1["deleted"]) == (0, 2, 1)  # blind upserts count as updated
    assert o1["last_modified"] == 13 and o1["reread"] is False
    assert o1["bucket"] == bucket_of(T0) and o1["ingested_at"] == T0
    assert o1["app"] == "app" and o1["batch_id"] == "b1"
    assert [k["id"] for k in decode_keys(o1["keys"])] == ["a", "b", "c"]
    states = got[("o1", "email_states")]
    assert (states["inserted"], states["updated"]) == (1, 0)  # a log row is a new row
    assert decode_keys(states["keys"]) == ({"org_id": "o1", "id": "a", "at": 5, "event_id": "e1"},)
    index = [m for m in out if m.table == BUCKETS_TABLE.name]
    assert {(m.key["tenant"], m.key["bucket"]) for m in index} == {
        ("o1", bucket_of(T0)),
        ("o2", bucket_of(T0)),
    }


def test_existed_tells_inserted_from_updated_and_the_last_mutation_decides() -> None:
    written = [
        Upsert("t", {"id": "new"}, {"v": 1}, 10),
        Upsert("t", {"id": "old"}, {"v": 1}, 10),
        Upsert("t", {"id": "gone"}, {"v": 1}, 10),
        Delete("t", {"id": "gone"}, 11),  # deleted after the write: deleted
        Delete("t", {"id": "back"}, 10),
        Upsert("t", {"id": "back"}, {"v": 2}, 11),  # written after the delete: written
        Delete("t", {"id": "tie"}, 10),
        Upsert("t", {"id": "tie"}, {"v": 2}, 10),  # a tie: the delete wins, as in the store
        Delete("t", {"id": "cells"}, 10, columns=("v",)),  # cell tombstones: a change of the row
    ]
    existing = {"old", "back", "tie", "gone", "cells"}
    out = entries(
        notification_mutations("a", "b", written, None, T0, existed=lambda t, k: k["id"] in existing)
    )
    e = out[("-", "t")]
    assert (e["inserted"], e["updated"], e["deleted"]) == (1, 3, 2)


def test_tenant_of_and_the_default_tenant() -> None:
    written = [Upsert("t", {"tenant_id": "x", "id": "1"}, {"v": 1}, 1), Upsert("u", {"id": "1"}, {"v": 1}, 1)]
    assert set(entries(notification_mutations("a", "b", written, None, T0))) == {("x", "t"), ("-", "u")}
    custom = notification_mutations("a", "b", written, lambda table, key: f"T-{table}", T0)
    assert set(entries(custom)) == {("T-t", "t"), ("T-u", "u")}


def test_past_max_keys_the_keys_go_in_slices_and_past_max_parts_one_entry_says_reread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = [Upsert("t", {"org_id": "o", "id": f"{i:02}"}, {"v": i}, i + 1) for i in range(25)]
    written.append(Delete("t", {"org_id": "o", "id": "07"}, 99))  # the delete decides row 07
    rows = [m for m in notification_mutations("a", "b", written, None, T0, max_keys=10)
            if m.table == NOTIFICATION_TABLE.name]  # fmt: skip
    assert [m.key["batch_id"] for m in rows] == ["b", "b#2", "b#3"]
    assert {m.key["ingested_at"] for m in rows} == {T0}
    listed = [[k["id"] for k in decode_keys(m.cells["keys"])] for m in rows]
    assert listed == [[f"{i:02}" for i in range(a, min(a + 10, 25))] for a in (0, 10, 20)]
    counts = [
        (m.cells["updated"], m.cells["deleted"], m.cells["last_modified"], m.cells["reread"]) for m in rows
    ]
    assert counts == [(9, 1, 99, False), (10, 0, 20, False), (5, 0, 25, False)]
    monkeypatch.setattr(entries_module, "MAX_PARTS", 2)  # three slices are past it: re-read
    bounded = entries(notification_mutations("a", "b", written, None, T0, max_keys=10))[("o", "t")]
    assert bounded["reread"] is True and bounded["keys"] is None and bounded["batch_id"] == "b"
    assert (bounded["updated"], bounded["deleted"], bounded["last_modified"]) == (24, 1, 99)
    none = entries(notification_mutations("a", "b", written, None, T0, max_keys=0))[("o", "t")]
    assert none["reread"] is True and none["keys"] is None  # max_keys 0: never listed
    one = entries(notification_mutations("a", "b", written, None, T0, max_keys=25))[("o", "t")]
    assert one["reread"] is False and len(decode_keys(one["keys"])) == 25


def test_an_entry_lists_at_most_max_keys_bytes_of_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries_module, "MAX_KEYS_BYTES", 100)
    written = [Upsert("t", {"org_id": "o", "id": f"{i:02}"}, {"v": i}, i + 1) for i in range(10)]
    rows = [
        m for m in notification_mutations("a", "b", written, None, T0) if m.table == NOTIFICATION_TABLE.name
    ]
    texts = [m.cells["keys"] for m in rows]
    assert len(rows) > 1 and all(len(t) <= 100 for t in texts)
    assert [k for t in texts for k in decode_keys(t)] == [{"id": f"{i:02}", "org_id": "o"} for i in range(10)]
    index = [m for m in notification_mutations("a", "b", written, None, T0) if m.table == BUCKETS_TABLE.name]
    assert len(index) == 1  # one bucket-index row a tenant, however many entries
    monkeypatch.setattr(entries_module, "MAX_KEYS_BYTES", 20)  # one key alone is longer: re-read
    alone = entries(notification_mutations("a", "b", written, None, T0))[("o", "t")]
    assert alone["reread"] is True and alone["keys"] is None


def test_pure_the_same_batch_gives_the_same_rows_in_any_order() -> None:
    written = [Upsert("t", {"org_id": f"o{i % 3}", "id": str(i)}, {"v": i}, i + 1) for i in range(30)]
    a = notification_mutations("a", "b", written, None, T0, ttl=60)
    b = notification_mutations("a", "b", list(reversed(written)), None, T0, ttl=60)
    assert a == b
    assert all(m.version == T0 for m in a)
    assert {m.ttl for m in a if m.table == NOTIFICATION_TABLE.name} == {60}
    assert {m.ttl for m in a if m.table == BUCKETS_TABLE.name} == {
        60 + 3600
    }  # as long as its bucket's last entry


def test_bucket_width_must_divide_a_day_and_buckets_follow_it() -> None:
    written = [Upsert("t", {"id": "1"}, {"v": 1}, 1)]
    e = entries(notification_mutations("a", "b", written, None, T0 + 5, bucket_width=HOUR // 4))[("-", "t")]
    assert e["bucket"] == bucket_of(T0 + 5, HOUR // 4) and e["bucket"] % (HOUR // 4) == 0
    with pytest.raises(ValueError, match="divisor of a day"):
        notification_mutations("a", "b", written, None, T0, bucket_width=7 * HOUR)


def test_key_ident_is_canonical_json() -> None:
    for key in ({"b": 'x\u00e9"', "a": 3}, {"id": -7, "ok": True}, {"f": 1.5, "s": "\n"}, {"id": b"\x01"}):
        assert key_ident(key) == json.dumps(_jsonable(key), sort_keys=True, separators=(",", ":"))


def test_keys_round_trip_bytes_and_writes_to_notification_tables_are_not_announced() -> None:
    keys = [{"id": b"\x00\xff", "n": 3}]
    assert decode_keys(encode_keys(keys)) == tuple(keys)
    assert json.loads(encode_keys(keys)) == [{"id": {"$bytes": "AP8="}, "n": 3}]
    own = notification_mutations("a", "b", [Upsert("t", {"id": "1"}, {"v": 1}, 1)], None, T0)
    assert notification_mutations("a", "b2", own, None, T0 + 1) == []
