"""App declarations, routing, map_event, the change feed and Settings: the glue, unit by unit."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from framework import App, Column, Event, TableSchema, Upsert
from framework.core.events import EventError, parse_event
from framework.core.schema import SchemaError
from framework.runtime import change_feed
from framework.runtime.change_feed import (
    CHANGE_TYPE,
    CHANGES_TYPE,
    change_partition,
    change_records,
    changed_partitions,
)
from framework.runtime.errors import MessageError, SinkFailure, error_class, is_transient, stage_of
from framework.runtime.mapping import map_event
from framework.runtime.processor import bounded
from framework.settings import Settings
from framework.worker.wiring import build_worker
from stores.errors import PermanentStoreError, TransientStoreError
from tests.app.toy import NOTE, NoteAgent, NoteProjection, ev, toy_app


def test_tables_include_each_projection_version_table_once() -> None:
    app = toy_app()
    names = [t.name for t in app.tables]
    assert names == ["note", "note_log", "audit", "notes_version"]
    version = app.tables[-1]
    assert version.partition_key == NOTE.partition_key and [c.name for c in version.columns] == ["version"]


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="duplicate agent name"):
        App("x", agents=[NoteAgent(), NoteAgent()])
    other = TableSchema("note", (Column("note_id", "text"),), (Column("body", "text"),))

    class Clash(NoteAgent):
        name, topic, tables, event_types = "clash", "clash-in", (other,), ()

    with pytest.raises(SchemaError, match="declared twice"):
        App("x", agents=[NoteAgent(), Clash()])

    class Other(NoteAgent):
        name, topic = "other", "other-in"

    with pytest.raises(ValueError, match="event type 'note.set'"):
        App("x", agents=[NoteAgent(), Other()])

    bad_source = TableSchema("keyed_else", (Column("other_id", "text"),), (Column("x", "text"),))

    class Mixed(NoteProjection):
        name = "mixed"
        tables = (NOTE, bad_source)

    with pytest.raises(SchemaError, match="partitioned by"):
        App("x", agents=[NoteAgent()], projections=[Mixed()])


def test_route_by_topic_then_declared_type() -> None:
    app = toy_app()
    assert app.route(ev("note.set", "n1", 1)).name == "notes"
    assert app.route(ev("anything", "n1", 1), topic="notes-in").name == "notes"
    with pytest.raises(EventError, match="declares event type 'nope'"):
        app.route(ev("nope", "n1", 1))
    with pytest.raises(EventError, match="consumes 'other'"):
        app.route(ev("note.set", "n1", 1), topic="other")


def test_topics_and_views_of() -> None:
    app = toy_app()
    assert app.topics() == {"notes-in": "notes", "toy.notes.changes": "project.notes"}
    assert app.views_of(app.agent("notes")) == app.projections
    with pytest.raises(KeyError, match="no projection 'x'"):
        app.projection("x")


def test_map_event_adds_one_version_mark_per_touched_partition() -> None:
    app = toy_app()
    agent, (projection,) = app.agent("notes"), app.projections
    muts = map_event(agent, ev("note.set", "n1", 20, title="a"), app.projections)
    assert muts[-1] == Upsert("notes_version", {"note_id": "n1"}, {"version": 20}, 20)
    assert len(muts) == 2
    audit = map_event(agent, ev("note.audit", "n1", 5), app.projections)
    assert [m.table for m in audit] == ["audit"]  # not a source table: no mark
    assert projection.touched(muts) == {"n1": ({"note_id": "n1"}, 20)}


@pytest.mark.parametrize(
    ("event", "cause"),
    [
        (ev("note.bogus", "n1", 1), "BadMessage"),
        (ev("note.clear", "n1", 1), "KeyError"),  # payload without columns: a bug in the data
        (ev("note.set", "n1", 1, title=object()), "MutationError"),
    ],
)
def test_anything_handle_raises_is_a_bad_message_at_map(event: Event, cause: str) -> None:
    with pytest.raises(MessageError) as info:
        map_event(NoteAgent(), event, ())
    assert stage_of(info.value) == "map" and error_class(info.value) == cause
    assert not is_transient(info.value)


def test_handle_returning_a_non_mutation_is_a_bad_message() -> None:
    class Sloppy(NoteAgent):
        def handle(self, event: Event):  # type: ignore[override]
            return [{"table": "note"}]

    with pytest.raises(MessageError, match="returned dict"):
        map_event(Sloppy(), ev("note.set", "n1", 1), ())


def test_change_records_list_each_partition_once_at_the_highest_version() -> None:
    projection = NoteProjection()
    batch = [
        (ev("note.set", "n1", 30), [Upsert("note", {"note_id": "n1"}, {"title": "a"}, 30)]),
        (ev("note.set", "n1", 31), [Upsert("note", {"note_id": "n1"}, {"score": 1.0}, 31)]),
        (ev("note.set", "n2", 7), [Upsert("note", {"note_id": "n2"}, {"title": "b"}, 7)]),
        (ev("audit", "x", 99), [Upsert("audit", {"id": "x"}, {"n": 1}, 99)]),
    ]
    [(part, key, value)] = change_records(batch, projection, partitions=1)
    record = parse_event(value)
    assert part == 0 and key == b"notes/0" and record.type == CHANGES_TYPE
    assert record.payload["changes"] == [
        {"key": {"note_id": "n1"}, "version": 31},
        {"key": {"note_id": "n2"}, "version": 7},
    ]
    assert changed_partitions(record, projection) == [{"note_id": "n1"}, {"note_id": "n2"}]
    again = change_records(list(reversed(batch)), projection, partitions=1)
    assert parse_event(again[0][2]).event_id == record.event_id  # same changes, same id


def test_change_records_go_where_the_default_partitioner_sends_the_document_id() -> None:
    projection = NoteProjection()
    ids = [f"n{i}" for i in range(200)]
    batch = [(ev("note.set", i, 1), [Upsert("note", {"note_id": i}, {"title": "t"}, 1)]) for i in ids]
    records = change_records(batch, projection, partitions=4)
    partitioner = DefaultPartitioner()
    for part, _, value in records:
        for key in changed_partitions(parse_event(value), projection):
            doc = projection.document_id(key).encode()
            assert partitioner(doc, [0, 1, 2, 3], [0, 1, 2, 3]) == part == change_partition(doc.decode(), 4)
    assert sorted(p for p, _, _ in records) == [0, 1, 2, 3]
    assert sum(len(parse_event(v).payload["changes"]) for _, _, v in records) == 200


def test_change_records_are_split_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(change_feed, "MAX_CHANGES_PER_RECORD", 3)
    projection = NoteProjection()
    ids = [f"n{i}" for i in range(7)]
    batch = [(ev("note.set", i, 1), [Upsert("note", {"note_id": i}, {"title": "t"}, 1)]) for i in ids]
    records = change_records(batch, projection, partitions=1)
    assert [len(parse_event(v).payload["changes"]) for _, _, v in records] == [3, 3, 1]


def test_changed_partitions_reads_both_record_types_and_rejects_bad_keys() -> None:
    projection = NoteProjection()
    single = Event("e", "n1", 1, 1, CHANGE_TYPE, {"projection": "notes", "key": {"note_id": "n1"}})
    assert changed_partitions(single, projection) == [{"note_id": "n1"}]
    wrong = Event("e", "n1", 1, 1, CHANGE_TYPE, {"projection": "notes", "key": {"note_id": 5}})
    with pytest.raises(EventError, match="payload.key"):
        changed_partitions(wrong, projection)
    changes = [{"key": {"note_id": "a"}}, 3]
    bad = Event("e", "k", 1, 1, CHANGES_TYPE, {"projection": "notes", "changes": changes})
    with pytest.raises(EventError, match=r"payload.changes\[1\].key"):
        changed_partitions(bad, projection)
    for payload in ({"projection": "notes", "changes": []}, {"projection": "notes"}):
        with pytest.raises(EventError, match="payload.changes"):
            changed_partitions(Event("e", "k", 1, 1, CHANGES_TYPE, payload), projection)
    with pytest.raises(EventError, match="not a change of"):
        changed_partitions(Event("e", "k", 1, 1, CHANGES_TYPE, {"projection": "x"}), projection)
    with pytest.raises(EventError, match="expected partitions_changed"):
        changed_partitions(ev("note.set", "n1", 1), projection)


async def test_bounded_classifies_sink_failures() -> None:
    async def fail(exc: Exception) -> None:
        raise exc

    async def hang() -> None:
        import asyncio

        await asyncio.sleep(10)

    with pytest.raises(SinkFailure) as slow:
        await bounded("store", 0.01, hang())
    assert slow.value.sink == "store" and isinstance(slow.value.cause, TransientStoreError)
    with pytest.raises(SinkFailure):
        await bounded("store", 1, fail(TransientStoreError("503")))
    with pytest.raises(SinkFailure):
        await bounded("store", 1, fail(ConnectionResetError("peer reset")))
    for odd in (RuntimeError("?"), ValueError("Exceeds the limit (4300 digits)"), RecursionError()):
        with pytest.raises(MessageError) as parked:  # not I/O: the message's, parked (never dropped)
            await bounded("store", 1, fail(odd))
        assert stage_of(parked.value) == "sink" and not is_transient(parked.value)
    with pytest.raises(MessageError) as bad:
        await bounded("store", 1, fail(PermanentStoreError("400")))
    assert stage_of(bad.value) == "sink" and error_class(bad.value) == "PermanentStoreError"


def test_settings_flags_then_environment_then_defaults(tmp_path: Path) -> None:
    env = {"CONVERGE_BROKER": "127.0.0.1:9999", "CONVERGE_DATA_DIR": str(tmp_path / "d")}
    s = Settings.resolve("toy", env=env)
    assert s.broker == "kafka://127.0.0.1:9999" and s.bootstrap == "127.0.0.1:9999"
    assert s.wide_store == f"sqlite:///{tmp_path / 'd' / 'wide.db'}" and s.dlq_root == tmp_path / "d" / "dlq"
    assert s.es_url is None and s.es_tombstones == "native" and s.partitions == 4
    flagged = Settings.resolve("toy", env=env, broker="kafka://h:1", partitions=2)
    assert (flagged.broker, flagged.partitions) == ("kafka://h:1", 2)
    assert Settings.resolve("toy", env={"CONVERGE_APP_ID": "other"}).app_id == "other"
    assert Settings.resolve("toy", env={}).data_dir == Path("var/toy")
    again = Settings.resolve(None, env=s.as_env())
    assert again == s


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CONVERGE_ES_TOMBSTONES": "soft"}, "'native' or 'document'"),
        ({"CONVERGE_PARTITIONS": "four"}, "partitions .CONVERGE_PARTITIONS.: expected an integer"),
        ({"CONVERGE_PARTITIONS": "0"}, "at least 1"),
    ],
)
def test_settings_errors_name_the_setting(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.resolve("toy", env=env)


def test_a_worker_for_an_app_with_projections_needs_an_index(tmp_path: Path) -> None:
    settings = Settings.resolve("toy", env={"CONVERGE_DATA_DIR": str(tmp_path)})
    with pytest.raises(ValueError, match="set es_url"):
        build_worker(toy_app(), settings)


def test_the_worker_has_one_runtime_per_agent_and_projection(tmp_path: Path) -> None:
    settings = Settings.resolve(
        "toy", env={"CONVERGE_DATA_DIR": str(tmp_path), "CONVERGE_ES_URL": "http://127.0.0.1:9"}
    )
    worker = build_worker(toy_app(), settings)
    assert [r.name for r in worker.converge.runtimes] == ["notes", "project.notes"]
    assert [r.topic_name for r in worker.converge.runtimes] == ["notes-in", "toy.notes.changes"]
    status = worker.converge.status()  # before start: counters only
    assert status["notes"]["counters"]["received"] == 0 and status["notes"]["partitions"] == {}
