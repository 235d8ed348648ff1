"""The Cassandra store's CQL, checked through the driver's own objects (no Cassandra server exists here).

No Cassandra server can be installed on this machine. These tests drive
``CassandraStore`` against ``tests.stores.cassandra_fakes.FakeSession``: every
statement is prepared into a real ``cassandra.query.PreparedStatement`` (bind
metadata as a server reports it) and bound by the driver; the serialised
values are read back with ``cassandra.cqltypes``. What a real cluster does with
the statements is covered by ``test_cassandra_cluster.py`` when one is reachable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from cassandra import ConsistencyLevel, OperationTimedOut
from cassandra import protocol as p
from cassandra.metadata import ColumnMetadata, KeyspaceMetadata, TableMetadata
from cassandra.query import BatchStatement, BatchType, BoundStatement, dict_factory

from framework.core.cells import Cell
from framework.core.mutations import CellValue, Delete, LogState, MutationError, Upsert
from framework.core.schema import SchemaError, TableSchema
from stores.cassandra import CassandraStore
from stores.cassandra import statements as cql
from stores.errors import PermanentStoreError
from tests.stores.cassandra_fakes import (
    Call,
    FakeSession,
    bind_metadata,
    bound_columns,
    decode,
    rows_result,
    void_result,
    written,
)
from tests.stores.harness import hub_schema, log_schema, timeline_schema

K: dict[str, CellValue] = {"org": "acme", "id": 7}
HUB, TL, LOG = hub_schema("hub", 3600), timeline_schema("tl", "DESC"), log_schema("log")
HUB_COLS = '"title", "n", "small", "score", "flag", "data"'
Make = Callable[..., Any]


@pytest.fixture()
async def make() -> AsyncIterator[Make]:
    """Builds a store over a FakeSession with the hub, timeline and log tables declared."""
    sessions: list[FakeSession] = []

    async def build(responder: Any = None, **kw: Any) -> tuple[CassandraStore, FakeSession]:
        session = FakeSession(
            {"hub": HUB, "tl": TL, "log": LOG}, responder, row_factory=kw.pop("rf", dict_factory)
        )
        sessions.append(session)
        store = CassandraStore(session, "ks", **kw)
        for schema in (HUB, TL, LOG):
            await store.ensure_table(schema)
        session.calls.clear()
        return store, session

    yield build
    for s in sessions:
        s.shutdown()


def _writes(session: FakeSession) -> list[tuple[str, list[Any]]]:
    return [w for c in session.calls for w in written(session, c.statement)]


# -- DDL ------------------------------------------------------------------------------------------


def test_table_ddl_declares_key_order_and_default_ttl() -> None:
    assert cql.create_table("ks", HUB).text == (
        'CREATE TABLE IF NOT EXISTS "ks"."hub" ("org" text, "id" bigint, "title" text, "n" bigint, '
        '"small" int, "score" double, "flag" boolean, "data" blob, PRIMARY KEY (("org", "id"))) '
        "WITH default_time_to_live = 3600 AND comment = 'converge columns: title n small score flag data'"
    )
    assert cql.create_table("ks", TL).text == (
        'CREATE TABLE IF NOT EXISTS "ks"."tl" ("org" text, "day" bigint, "seq" text, "note" text, '
        '"weight" double, PRIMARY KEY (("org"), "day", "seq")) '
        'WITH CLUSTERING ORDER BY ("day" DESC, "seq" DESC) AND comment = \'converge columns: note weight\''
    )
    assert cql.create_table("ks", hub_schema("h")).text.endswith(
        'PRIMARY KEY (("org", "id"))) WITH comment = \'converge columns: title n small score flag data\''
    )


def test_keyspace_ddl_and_rejected_identifiers() -> None:
    assert cql.create_keyspace("ks", 3).text == (
        "CREATE KEYSPACE IF NOT EXISTS \"ks\" WITH replication = {'class': 'SimpleStrategy', "
        "'replication_factor': 3}"
    )
    nts = cql.create_keyspace("ks", datacenters={"us-east": 3, "eu_1": 2}).text
    assert nts.endswith("{'class': 'NetworkTopologyStrategy', 'eu_1': 2, 'us-east': 3}")
    for bad in ('ks"; DROP KEYSPACE x; --', "1ks", "", "a" * 49, "ks\n"):
        with pytest.raises(MutationError):
            cql.create_keyspace(bad)
    for dc in ("dc'}; --", "dc1\n"):
        with pytest.raises(SchemaError):
            cql.create_keyspace("ks", datacenters={dc: 1})
    for name in ("t\n", "users\n"):
        with pytest.raises(MutationError):
            cql.quote(name)
        with pytest.raises(MutationError):
            cql.qualified("ks", name)
    for rf in (0, -1, True, 1.5):
        with pytest.raises(SchemaError):
            cql.create_keyspace("ks", rf)  # type: ignore[arg-type]
    with pytest.raises(MutationError):
        CassandraStore(object(), 'ks"x')


async def test_ensure_table_runs_idempotent_ddl_once_and_rejects_redeclaration(make: Make) -> None:
    store, session = await make()
    await store.ensure_table(HUB)
    assert session.calls == []  # already declared: nothing sent
    other = TableSchema("hub", HUB.partition_key, HUB.columns[:2])
    with pytest.raises(SchemaError):
        await store.ensure_table(other)
    await store.ensure_keyspace(2)
    (call,) = session.calls
    assert call.statement.query_string.startswith('CREATE KEYSPACE IF NOT EXISTS "ks"')
    assert call.statement.is_idempotent and call.timeout == store.ddl_timeout


def _driver_metadata(schema: TableSchema, comment: str | None, **changes: Any) -> KeyspaceMetadata:
    """Keyspace metadata as the driver builds it from system_schema (regular columns alphabetical)."""
    ks = KeyspaceMetadata("ks", True, "SimpleStrategy", {"replication_factor": "1"})
    table = TableMetadata("ks", schema.name, options={"default_time_to_live": schema.default_ttl or 0})
    if comment is not None:
        table.options["comment"] = comment
    desc = schema.clustering_order == "DESC"
    cols = [*schema.key_columns, *sorted(schema.columns, key=lambda c: c.name)]
    for c in cols:
        meta = ColumnMetadata(
            table, c.name, changes.get(c.name, c.type), is_reversed=desc and c in schema.clustering_key
        )
        table.columns[c.name] = meta
    table.partition_key = [table.columns[c.name] for c in schema.partition_key]
    table.clustering_key = [table.columns[c.name] for c in schema.clustering_key]
    ks.tables[schema.name] = table
    return ks


async def test_existing_tables_are_read_back_and_checked_for_drift() -> None:
    session = FakeSession({"hub": HUB, "tl": TL})
    try:
        session.cluster.metadata.keyspaces["ks"] = _driver_metadata(TL, cql.column_order_comment(TL))
        store = CassandraStore(session, "ks")
        assert store.schema("tl") == TL  # e.g. after a restart, without a new declaration
        with pytest.raises(SchemaError, match=r"lacks columns \['weight'\].*never dropped"):
            await store.ensure_table(
                TableSchema("tl", TL.partition_key, TL.columns[:1], TL.clustering_key, "DESC")
            )
        await store.ensure_table(TL)
        session.cluster.metadata.keyspaces["ks"] = _driver_metadata(HUB, None, n="text")
        other = CassandraStore(session, "ks")
        assert [c.name for c in other.schema("hub").columns] == [
            "data",
            "flag",
            "n",
            "score",
            "small",
            "title",
        ]
        assert other.schema("hub").default_ttl == 3600
        with pytest.raises(SchemaError, match="column n is text, declared bigint"):
            await other.ensure_table(HUB)
        session.cluster.metadata.keyspaces["ks"].tables["tl"] = _driver_metadata(TL, None).tables["tl"]
        with pytest.raises(SchemaError, match="clustering order is DESC, declared ASC"):
            await other.ensure_table(timeline_schema("tl", "ASC"))
        assert not [c for c in session.calls if c.statement.query_string.startswith("ALTER")]
    finally:
        session.shutdown()


OLD_HUB = TableSchema("hub", HUB.partition_key, HUB.columns[:2], default_ttl=3600)  # title, n
OLD_COMMENT = cql.column_order_comment(OLD_HUB)
ADDED = [
    'ALTER TABLE "ks"."hub" ADD "small" int',
    'ALTER TABLE "ks"."hub" ADD "score" double',
    'ALTER TABLE "ks"."hub" ADD "flag" boolean',
    'ALTER TABLE "ks"."hub" ADD "data" blob',
]
COMMENT = 'ALTER TABLE "ks"."hub" WITH comment = \'converge columns: title n small score flag data\''


async def test_ensure_table_adds_the_columns_an_existing_table_lacks() -> None:
    """One ``ALTER TABLE .. ADD`` per missing column (identifiers quoted, types from the schema),
    then the column-order comment; idempotent DDL with the DDL timeout."""
    session = FakeSession({"hub": HUB})
    try:
        session.cluster.metadata.keyspaces["ks"] = _driver_metadata(OLD_HUB, OLD_COMMENT)
        store = CassandraStore(session, "ks")
        await store.ensure_table(HUB)
        texts = [c.statement.query_string for c in session.calls]
        assert texts == [cql.create_table("ks", HUB).text, *ADDED, COMMENT]
        assert all(c.statement.is_idempotent and c.timeout == store.ddl_timeout for c in session.calls)
        assert store.schema("hub") == HUB
        session.calls.clear()
        await store.apply([Upsert("hub", K, {"small": 1}, 5)])  # the new column is writable at once
        assert _writes(session)[-1] == ('UPDATE "ks"."hub" USING TIMESTAMP ? AND TTL ? SET "small" = ? '
                                        'WHERE "org" = ? AND "id" = ?', [5, 3600, 1, "acme", 7])  # fmt: skip
    finally:
        session.shutdown()


async def test_a_column_another_writer_added_first_is_accepted_else_the_alter_error_stands() -> None:
    """ALTER fails when the column exists already: the re-read metadata decides (the driver turns the
    server's 0x2200 message into InvalidRequest, a permanent store error)."""
    session = FakeSession({"hub": HUB})
    try:
        session.cluster.metadata.keyspaces["ks"] = _driver_metadata(OLD_HUB, OLD_COMMENT)
        raced = _driver_metadata(HUB, None).tables["hub"]

        def responder(call: Call) -> Any:
            if call.statement.query_string == ADDED[0]:  # another writer added "small" meanwhile
                session.cluster.metadata.keyspaces["ks"].tables["hub"].columns["small"] = raced.columns[
                    "small"
                ]
                return p.InvalidRequestException(
                    0x2200, "Invalid column name small because it conflicts", None
                )
            return void_result()

        session.responder = responder
        store = CassandraStore(session, "ks")
        await store.ensure_table(HUB)
        assert [c.statement.query_string for c in session.calls][1:] == [*ADDED, COMMENT]
        assert store.schema("hub") == HUB

        session.cluster.metadata.keyspaces["ks"] = _driver_metadata(OLD_HUB, OLD_COMMENT)
        session.responder = lambda call: p.InvalidRequestException(0x2200, "no ALTER permission", None)
        with pytest.raises(PermanentStoreError, match="no ALTER permission"):
            await CassandraStore(session, "ks").ensure_table(HUB)
    finally:
        session.shutdown()


# -- writes ---------------------------------------------------------------------------------------


async def test_upsert_is_an_update_with_timestamp_ttl_and_typed_values(make: Make) -> None:
    store, session = await make(consistency=ConsistencyLevel.ONE, request_timeout=3.0)
    cells: dict[str, CellValue] = {
        "data": b"\x00\xff",
        "title": "t\u00e9",
        "n": -(2**63),
        "small": 2**31 - 1,
        "score": 2,
        "flag": False,
    }
    await store.apply([Upsert("hub", K, cells, 2**63 - 1, ttl=60)])
    ((text, values),) = _writes(session)
    assert text == (
        'UPDATE "ks"."hub" USING TIMESTAMP ? AND TTL ? SET "title" = ?, "n" = ?, "small" = ?, "score" = ?, '
        '"flag" = ?, "data" = ? WHERE "org" = ? AND "id" = ?'
    )
    assert values == [2**63 - 1, 60, "t\u00e9", -(2**63), 2**31 - 1, 2.0, False, b"\x00\xff", "acme", 7]
    bound = session.calls[0].statement
    assert isinstance(bound, BoundStatement)
    assert bound.is_idempotent and bound.consistency_level == ConsistencyLevel.ONE
    # the partition key is bound, so the driver can route the write to a replica (composite key format)
    assert bound.routing_key == b"\x00\x04acme\x00" + b"\x00\x08" + (7).to_bytes(8, "big") + b"\x00"
    assert session.calls[0].timeout == 3.0


async def test_upsert_ttl_defaults_none_cells_and_statement_cache(make: Make) -> None:
    store, session = await make()
    await store.apply(
        [
            Upsert("hub", K, {"title": "a", "n": 1}, 5),  # table default TTL, bound explicitly
            Upsert("hub", {**K, "id": 8}, {"n": 2, "title": None}, 6, ttl=9),  # same shape, other order
            Upsert("tl", {"org": "o", "day": 1, "seq": "s"}, {"note": "x"}, 7),  # no default: TTL 0
        ]
    )
    by_key = {
        tuple(v[-2:]) if t.startswith('UPDATE "ks"."hub"') else tuple(v[-3:]): (t, v)
        for t, v in _writes(session)
    }
    assert by_key[("acme", 7)][1] == [5, 3600, "a", 1, "acme", 7]
    assert by_key[("acme", 8)][1] == [6, 9, None, 2, "acme", 8]  # None binds null: a cell tombstone
    assert by_key[("o", 1, "s")] == (
        'UPDATE "ks"."tl" USING TIMESTAMP ? AND TTL ? SET "note" = ? '
        'WHERE "org" = ? AND "day" = ? AND "seq" = ?',
        [7, 0, "x", "o", 1, "s"],
    )
    null_bound = next(c.statement for c in session.calls if decode(c.statement)[-1] == 8)
    assert null_bound.values[2] is None
    assert sorted(session.prepared) == sorted(set(session.prepared)) and len(session.prepared) == 2
    await store.apply([Upsert("hub", K, {"n": 3, "title": "b"}, 8)])
    assert len(session.prepared) == 2  # cached per (table, column set, kind)


async def test_deletes_of_row_partition_and_cells(make: Make) -> None:
    store, session = await make()
    row: dict[str, CellValue] = {"org": "o", "day": 3, "seq": "s"}
    await store.apply(
        [Delete("tl", row, 11), Delete("tl", {"org": "o"}, 12), Delete("hub", K, 13, ("flag", "title"))]
    )
    assert sorted(_writes(session)) == [
        (
            'DELETE "title", "flag" FROM "ks"."hub" USING TIMESTAMP ? WHERE "org" = ? AND "id" = ?',
            [13, "acme", 7],
        ),
        ('DELETE FROM "ks"."tl" USING TIMESTAMP ? WHERE "org" = ?', [12, "o"]),
        (
            'DELETE FROM "ks"."tl" USING TIMESTAMP ? WHERE "org" = ? AND "day" = ? AND "seq" = ?',
            [11, "o", 3, "s"],
        ),
    ]
    batch, lone = sorted(session.calls, key=lambda c: not isinstance(c.statement, BatchStatement))
    assert batch.statement.batch_type == BatchType.UNLOGGED and len(batch.statement) == 2  # both "tl"/"o"
    assert isinstance(lone.statement, BoundStatement)
    assert all(c.statement.is_idempotent for c in session.calls)
    assert all(c.statement.consistency_level == ConsistencyLevel.LOCAL_QUORUM for c in session.calls)


async def test_log_state_writes_its_row_by_at_and_event_id(make: Make) -> None:
    store, session = await make()
    await store.apply([LogState("log", {"entity": "m1"}, "opened", 200, "ev2", 3, {"actor": "bob"})])
    assert _writes(session) == [
        (
            'UPDATE "ks"."log" USING TIMESTAMP ? AND TTL ? SET "state" = ?, "actor" = ? '
            'WHERE "entity" = ? AND "at" = ? AND "event_id" = ?',
            [3, 0, "opened", "bob", "m1", 200, "ev2"],
        )
    ]


@pytest.mark.parametrize(
    "bad",
    [
        Upsert("hub", K, {"small": 2**31}, 1),
        Upsert("hub", K, {"title": 5}, 1),
        Upsert("hub", {"org": "acme"}, {"n": 1}, 1),
        Upsert("nope", K, {"n": 1}, 1),
        Delete("tl", {"org": "o"}, 1, ("note",)),  # cells of a whole partition
        Delete("tl", {"org": "o", "day": 1}, 1),  # neither the partition nor a row
        Delete("hub", K, 1, ("id",)),
        LogState("hub", K, "sent", 1, "e", 1),
    ],
)
async def test_invalid_mutation_fails_before_anything_is_sent(make: Make, bad: Any) -> None:
    store, session = await make()
    with pytest.raises(SchemaError):
        await store.apply([Upsert("hub", K, {"title": "ok"}, 1), bad])
    assert session.calls == [] and session.prepared == []


# -- grouping per partition ----------------------------------------------------------------------


def _tl(org: str, day: int, version: int = 1) -> Upsert:
    return Upsert("tl", {"org": org, "day": day, "seq": "s"}, {"note": f"{org}{day}"}, version)


async def test_writes_are_grouped_per_table_and_partition_into_unlogged_batches(make: Make) -> None:
    store, session = await make()
    await store.apply(
        [
            _tl("a", 1),
            _tl("b", 1),
            Delete("tl", {"org": "a"}, 1),  # a partition tombstone joins its partition's batch
            _tl("a", 2),
            Upsert("hub", K, {"n": 1}, 1),
            Upsert("hub", K, {"title": "t"}, 2),  # another shape (column set), same row
            Upsert("hub", {**K, "id": 8}, {"n": 1}, 1),
        ]
    )
    shapes = sorted(
        (
            type(c.statement).__name__,
            sorted(str(w.get("org")) + str(w.get("id", "")) for w in bound_columns(session, c.statement)),
        )
        for c in session.calls
    )
    assert shapes == [
        ("BatchStatement", ["a", "a", "a"]),  # tl/"a": two rows and the partition tombstone
        ("BatchStatement", ["acme7", "acme7"]),  # hub/("acme", 7)
        ("BoundStatement", ["acme8"]),
        ("BoundStatement", ["b"]),
    ]
    for call in session.calls:
        statement = call.statement
        assert statement.is_idempotent and statement.consistency_level == ConsistencyLevel.LOCAL_QUORUM
        if isinstance(statement, BatchStatement):
            assert statement.batch_type == BatchType.UNLOGGED
            assert (
                statement.keyspace == "ks" and statement.routing_key
            )  # routed like its writes (token-aware)
            assert call.timeout == store.request_timeout


async def test_the_same_partition_key_in_two_tables_is_two_requests(make: Make) -> None:
    store, session = await make()
    await store.apply([_tl("a", 1), _tl("a", 2), LogState("log", {"entity": "a"}, "s", 1, "e", 1)])
    assert sorted(type(c.statement).__name__ for c in session.calls) == ["BatchStatement", "BoundStatement"]


@pytest.mark.parametrize(("cap", "sizes"), [(3, [1, 3, 3]), (7, [7]), (1, [1] * 7)])
async def test_a_partition_group_is_split_at_the_statement_cap(
    make: Make, cap: int, sizes: list[int]
) -> None:
    store, session = await make(max_batch_statements=cap)
    await store.apply([_tl("a", day) for day in range(7)])
    assert sorted(len(written(session, c.statement)) for c in session.calls) == sizes
    assert sorted(w["day"] for c in session.calls for w in bound_columns(session, c.statement)) == list(
        range(7)
    )
    lone = [c for c in session.calls if len(written(session, c.statement)) == 1]
    assert all(isinstance(c.statement, BoundStatement) for c in lone)  # one write is never a batch


@pytest.mark.parametrize("cap", [0, 0x10000])
async def test_the_statement_cap_must_fit_the_protocol(make: Make, cap: int) -> None:
    with pytest.raises(ValueError, match="max_batch_statements"):
        await make(max_batch_statements=cap)


async def test_a_failed_batch_counts_its_writes_and_permanent_wins(make: Make) -> None:
    def responder(call: Call) -> Any:
        if isinstance(call.statement, BatchStatement):
            return p.InvalidRequestException(0x2200, "Key may not be empty", None)
        if bound_columns(session, call.statement)[0]["org"] == "slow":
            return OperationTimedOut("slow")
        return void_result()

    store, session = await make(responder)
    with pytest.raises(PermanentStoreError, match="unlogged batch of 3 writes to tl") as info:
        await store.apply([_tl("slow", 1), _tl("ok", 1), *(_tl("bad", d) for d in range(3))])
    assert len(session.calls) == 3  # every request is attempted
    assert "4 of 5 writes failed (2 of 3 requests)" in info.value.__notes__


# -- reads ----------------------------------------------------------------------------------------


def _hub_row(**cells: tuple[Any, int, int | None]) -> list[Any]:
    out: list[Any] = []
    for c in ("title", "n", "small", "score", "flag", "data"):
        out += list(cells.get(c, (None, None, None)))
    return out


@pytest.mark.parametrize("rf", ["dict", "named_tuple"])
async def test_read_row_selects_writetime_and_ttl_and_rebuilds_cells(make: Make, rf: str) -> None:
    names = [n for c in HUB_COLS.replace('"', "").split(", ") for n in (c, f"writetime({c})", f"ttl({c})")]
    answers = iter([_hub_row(title=("x", 40, 100), n=(5, 30, None)), _hub_row(), None])

    def responder(call: Call) -> Any:
        row = next(answers)
        return rows_result(names, [] if row is None else [row])

    factory = dict_factory if rf == "dict" else None
    store, session = await make(responder, clock=lambda: 1000.75, **({"rf": factory} if factory else {}))
    row = await store.read_row("hub", K)
    assert row is not None and dict(row.key) == K
    assert dict(row.cells) == {"title": Cell("x", 40, 1100), "n": Cell(5, 30, None)}
    assert row.version == 40
    assert await store.read_row("hub", K) is None  # a row of only null cells has no live cell
    assert await store.read_row("hub", K) is None  # no row at all
    text = session.calls[0].statement.prepared_statement.query_string
    assert text == (
        'SELECT "title", WRITETIME("title"), TTL("title"), "n", WRITETIME("n"), TTL("n"), '
        '"small", WRITETIME("small"), TTL("small"), "score", WRITETIME("score"), TTL("score"), '
        '"flag", WRITETIME("flag"), TTL("flag"), "data", WRITETIME("data"), TTL("data") '
        'FROM "ks"."hub" WHERE "org" = ? AND "id" = ?'
    )
    assert decode(session.calls[0].statement) == ["acme", 7]
    with pytest.raises(SchemaError):
        await store.read_row("hub", {"org": "acme"})


async def test_read_partition_bounds_order_limit_and_paging(make: Make) -> None:
    pages: dict[bytes | None, tuple[list[tuple[Any, ...]], bytes | None]] = {
        None: ([("o", 3, "b", "n3", 7, None, None, None, None)], b"p1"),
        b"p1": ([], b"p2"),
    }
    pages[b"p2"] = ([("o", 1, "a", "n1", 5, 9, 2.5, 5, 10)], None)

    def responder(call: Call) -> Any:
        rows, state = pages[call.paging_state]
        names = ["org", "day", "seq"] + [f"{f}{c}" for c in ("note", "weight") for f in ("", "w", "t")]
        return rows_result(names, rows, state)

    store, session = await make(responder, fetch_size=2, clock=lambda: 500.0)
    rows = await store.read_partition("tl", {"org": "o"}, start=[1], end=[3, "z"], limit=5, reverse=True)
    assert [dict(r.key) for r in rows] == [
        {"org": "o", "day": 3, "seq": "b"},
        {"org": "o", "day": 1, "seq": "a"},
    ]
    assert rows[1].cells == {"note": Cell("n1", 5, 509), "weight": Cell(2.5, 5, 510)}
    assert [c.paging_state for c in session.calls] == [None, b"p1", b"p2"]
    bound = session.calls[0].statement
    assert bound.fetch_size == 2 and all(c.statement is bound for c in session.calls)
    assert bound.prepared_statement.query_string == (
        'SELECT "org", "day", "seq", "note", WRITETIME("note"), TTL("note"), "weight", WRITETIME("weight"), '
        'TTL("weight") FROM "ks"."tl" WHERE "org" = ? AND ("day") >= (?) AND ("day", "seq") <= (?, ?) '
        'ORDER BY "day" ASC, "seq" ASC LIMIT ?'
    )
    assert decode(bound) == ["o", 1, 3, "z", 5]
    session.calls.clear()
    pages[None] = ([], None)
    assert await store.read_partition("tl", {"org": "o"}) == []
    assert session.calls[0].statement.prepared_statement.query_string.endswith(
        'FROM "ks"."tl" WHERE "org" = ?'
    )
    with pytest.raises(SchemaError):
        await store.read_partition("tl", {"org": "o"}, start=[1, "a", "extra"])
    with pytest.raises(SchemaError):
        await store.read_partition("tl", {"org": "o"}, start=["not a day"])
    with pytest.raises(ValueError):
        await store.read_partition("tl", {"org": "o"}, limit=0)


def test_builders_name_their_markers_as_a_server_reports_them() -> None:
    built = [
        cql.upsert("ks", "hub", ["org", "id"], ["title", "n"]),
        cql.delete("ks", "tl", ["org", "day", "seq"], ["note"]),
        cql.delete("ks", "tl", ["org"]),
        cql.select_row("ks", HUB),
        cql.select_partition("ks", TL, start_len=2, end_len=1, reverse=True, limit=True),
        cql.select_token_range("ks", TL),
    ]
    for statement in built:
        specs, _ = bind_metadata(statement.text, {"hub": HUB, "tl": TL})
        assert [s.name for s in specs] == list(statement.markers), statement.text
    with pytest.raises(SchemaError):
        cql.select_partition("ks", HUB, start_len=1)  # no clustering columns to bound
