"""Damage in the bucket is named, never hidden (issue 48), against the embedded S3 server.

Two hosts park 12 records each (24 in two segments); then one kind of damage is done to the
first segment's objects, and ``converge dlq`` must show it, report it with a non-zero exit and
one line naming it, and repair it with ``salvage``: an overwritten manifest, a deleted segment
object, a manifest whose count was lowered, a bit flip behind a stale metadata digest.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from framework.cli import main
from framework.dlq import DeadLetterWAL
from framework.dlq.bucket import QUARANTINE_PREFIX
from framework.dlq.tracker import Tracker
from stores.objects.store import ObjectStore
from tests.dlq.support import rec


@dataclass
class Bucket:
    objects: ObjectStore
    first: str  # the object name of the damaged segment (error class A)
    second: str


@pytest.fixture()
def bucket(converge_s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    url = f"s3://converge-dlq/{uuid.uuid4().hex}"
    env = {"CONVERGE_DLQ_OBJECTS": url, "CONVERGE_DLQ_S3_ENDPOINT": converge_s3,
           "CONVERGE_DLQ_S3_ACCESS_KEY": "test", "CONVERGE_DLQ_S3_SECRET_KEY": "test"}  # fmt: skip
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    objects = ObjectStore(url, endpoint=converge_s3, access_key="test", secret_key="test")
    objects.ensure_bucket()
    for host, error_class in (("a", "A"), ("b", "B")):
        with DeadLetterWAL(tmp_path / host, objects=objects) as wal:
            for i in range(12):
                wal.park_sync(rec(i, error_class=error_class, parked_at=1000.0 + i))
    first, second = sorted(i.key for i in objects.list("segments/"))
    yield Bucket(objects, first, second)
    objects.close()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["dlq", *argv])
    got = capsys.readouterr()
    return rc, got.out, got.err


def _live(capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    rc, out, _ = _run(capsys, "list", "--json")
    assert rc == 0
    return {r["error_class"]: r["live"] for r in json.loads(out)}


def _damaged_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("DAMAGED ")]


def test_a_segment_whose_manifest_is_overwritten_is_found_reported_and_adopted(
    bucket: Bucket, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = Tracker.key(bucket.first)
    bucket.objects.put(key, b"overwritten")
    assert _live(capsys) == {"A": 12, "B": 12}  # found from the segment object itself
    rc, out, _ = _run(capsys, "show", "--json", "--limit", "100")
    assert rc == 0 and len(out.splitlines()) == 24
    export = tmp_path / "all.jsonl"
    rc, _, err = _run(capsys, "export", "--out", str(export))
    assert rc == 1 and len(export.read_text().splitlines()) == 1 + 24 and bucket.first in err  # header + 24

    rc, out, _ = _run(capsys, "verify")
    assert rc == 1
    (line,) = _damaged_lines(out)
    assert line.startswith(f"DAMAGED {bucket.first} ") and f"unreadable manifest {key}" in line
    assert "salvage adopts it" in line
    rc, out, err = _run(capsys, "replay", "--dry-run")
    assert rc == 1 and "would replay 12 records from 1 segments" in out and bucket.first in err
    rc, out, err = _run(capsys, "discard", "--all")  # a segment without its manifest is never changed
    assert rc == 1 and "discarded 12 records in 1 segments" in out and bucket.first in err

    rc, out, _ = _run(capsys, "salvage")
    assert rc == 0
    assert f"adopted {bucket.first}: its manifest was unreadable" in out and "its 12 records" in out
    assert bucket.objects.get(QUARANTINE_PREFIX + key) == b"overwritten"
    rc, out, _ = _run(capsys, "verify")
    assert rc == 0 and "2 segments checked: 0 damaged" in out
    assert _live(capsys) == {"A": 12, "B": 0}  # adopted as sealed; B was discarded above
    got = Tracker(bucket.objects).read(bucket.first)
    assert got is not None and got[0].count == 12


def test_a_deleted_segment_object_is_salvaged_as_lost_with_its_count(
    bucket: Bucket, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket.objects.delete(bucket.first)
    rc, out, _ = _run(capsys, "verify")
    assert rc == 1
    (line,) = _damaged_lines(out)
    assert "12 unreadable records" in line and "segment object is missing" in line

    rc, out, _ = _run(capsys, "salvage")
    assert rc == 0, out
    lost = f"{QUARANTINE_PREFIX}{bucket.first}.lost.json"
    assert f"cleared {bucket.first} " in out and f"12 records lost; recorded in {lost}" in out
    record = json.loads(bucket.objects.get(lost))
    assert record["records_lost"] == 12 and record["manifest"]["count"] == 12
    assert Tracker(bucket.objects).read(bucket.first) is None
    rc, out, _ = _run(capsys, "verify")
    assert rc == 0 and "1 segments checked: 0 damaged" in out
    assert _live(capsys) == {"B": 12}


def test_a_manifest_whose_count_was_lowered_is_checked_against_the_segment(
    bucket: Bucket, capsys: pytest.CaptureFixture[str]
) -> None:
    key = Tracker.key(bucket.first)
    body = json.loads(bucket.objects.get(key))
    body["count"] = 9
    bucket.objects.put(key, json.dumps(body).encode())
    assert _live(capsys) == {"A": 12, "B": 12}  # what the segment holds
    rc, out, _ = _run(capsys, "verify")
    assert rc == 1
    (line,) = _damaged_lines(out)
    assert line.endswith("count mismatch: 12 records read, the manifest counts 9")
    rc, _, err = _run(capsys, "replay", "--dry-run")
    assert rc == 1 and "count mismatch" in err

    rc, out, _ = _run(capsys, "salvage")
    assert rc == 0 and "12 readable records kept" in out
    rc, out, _ = _run(capsys, "verify")
    assert rc == 0 and "0 damaged" in out
    assert _live(capsys) == {"A": 12, "B": 12}


def test_a_bit_flip_behind_a_stale_digest_is_named_a_content_digest_mismatch(
    bucket: Bucket, capsys: pytest.CaptureFixture[str]
) -> None:
    good = bucket.objects.get(bucket.first)
    bad = bytearray(good)
    bad[len(good) // 2] ^= 0x04
    bucket.objects._client.put_object(
        Bucket=bucket.objects.bucket, Key=bucket.objects.key(bucket.first), Body=bytes(bad),
        Metadata={"converge-sha256": hashlib.sha256(good).hexdigest()},
    )  # fmt: skip
    rc, out, _ = _run(capsys, "verify")
    assert rc == 1
    (line,) = _damaged_lines(out)
    assert "content digest mismatch" in line and "checksum mismatch" in line and "1 unreadable record" in line
    assert "missing" not in line and "do not match the stored size" not in line
    assert _live(capsys) == {"A": 12, "B": 12}

    rc, out, _ = _run(capsys, "salvage")
    assert rc == 0 and "11 readable records kept" in out  # only the flipped record is lost
    rc, out, _ = _run(capsys, "verify")
    assert rc == 0 and "0 damaged" in out
    assert _live(capsys) == {"A": 11, "B": 12}
