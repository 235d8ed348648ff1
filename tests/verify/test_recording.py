"""The projector's records of what it wrote (``framework.verify.digests.WRITTEN``) and the two
settings of issue 46: ``verify_sample`` and ``verify_record``, with the real SQLite store of the
test kit's ``Driver`` (its ``MemoryIndex``: no Elasticsearch server runs here)."""

from __future__ import annotations

import pytest

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from framework.settings import ENV, Settings
from framework.testing import Driver
from framework.verify.compare import as_stored
from framework.verify.digests import WRITTEN, Written, hit_digest, read_written
from stores.base import SearchHit

EVENTS = list(generate_history(3, 12).events)


def test_every_document_written_is_recorded_with_the_digest_of_the_copy_the_index_holds() -> None:
    with Driver(app) as d:
        assert d.send(EVENTS) == []
        view = app.projections[0]
        held = d.documents(view)
        assert len(held) > 5
        records = d.run(read_written(d.store, view.name, sorted(held)))
        for doc_id, record in zip(sorted(held), records, strict=True):
            doc, version = held[doc_id]
            assert record is not None and record.version == version and record.rows != 0
            assert record.doc == hit_digest(SearchHit(doc_id, version, as_stored(doc)))


def test_a_record_of_one_version_keeps_the_later_write() -> None:
    early, late = Written(5, 1, 2).encode(1_000), Written(5, 3, 4).encode(2_000)
    assert late > early and Written.decode(late) == Written(5, 3, 4)


def test_recording_off_writes_no_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV["verify_record"], "0")
    with Driver(app) as d:
        assert d.send(EVENTS) == []
        assert len(d.documents(app.projections[0])) > 5  # written, not recorded
        assert WRITTEN.name not in d.run(d.store.tables()) or not d.rows(WRITTEN.name)


def test_the_settings_rows_are_validated() -> None:
    assert Settings.resolve("a", env={}).verify_sample == 0.01
    assert Settings.resolve("a", env={}).verify_record is True
    assert Settings.resolve("a", env={ENV["verify_sample"]: "0.25"}).verify_sample == 0.25
    assert Settings.resolve("a", env={ENV["verify_record"]: "off"}).verify_record is False
    with pytest.raises(ValueError, match="verify_sample"):
        Settings.resolve("a", env={ENV["verify_sample"]: "2"})
