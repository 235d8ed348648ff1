"""``ALTER TABLE .. ADD`` and ``.. WITH`` over the wire: the driver sees the new columns, data stays."""

from __future__ import annotations

from typing import Any

from cassandra.query import UNSET_VALUE

from framework.core.schema import Column
from stores.cassandra import statements as cql
from tests.cql_server.tables import qualified, timeline, upsert
from tests.support.cql_server import CqlServer
from tests.support.cql_server.fixtures import KEYSPACE

# ruff: noqa: S608 - CQL text holds only generated table names

K = {"org": "o", "day": 1, "seq": "s"}


def test_added_columns_reach_the_driver_metadata_and_take_writes(
    cql_server: CqlServer, cql_session: Any
) -> None:
    schema = timeline(cql_session)
    upsert(cql_session, schema, K, {"note": "before"}, 10)
    cql_session.execute(cql.add_column(KEYSPACE, schema.name, Column("label", "text")).text)
    cql_session.execute(f"ALTER TABLE {qualified(schema)} ADD (n bigint, flag boolean)")
    table = cql_session.cluster.metadata.keyspaces[KEYSPACE].tables[schema.name]  # refreshed by the driver
    assert {name: c.cql_type for name, c in table.columns.items()} == {
        "org": "text", "day": "bigint", "seq": "text", "note": "text", "weight": "double",
        "label": "text", "n": "bigint", "flag": "boolean",
    }  # fmt: skip
    assert cql_server.storage.catalog.table(KEYSPACE, schema.name).regular == (
        "note", "weight", "label", "n", "flag"
    )  # fmt: skip
    write = cql_session.prepare(cql.upsert(KEYSPACE, schema.name, ["org", "day", "seq"], ["label", "n"]).text)
    cql_session.execute(write, (20, UNSET_VALUE, "new", 5, "o", 1, "s"))
    row = cql_session.execute(
        f"SELECT note, label, n, flag, WRITETIME(label) FROM {qualified(schema)} "
        "WHERE org = 'o' AND day = 1 AND seq = 's'"
    ).one()
    assert tuple(row) == ("before", "new", 5, None, 20)


def test_with_sets_the_comment_and_keeps_the_table(cql_session: Any) -> None:
    schema = timeline(cql_session)
    upsert(cql_session, schema, K, {"note": "kept"}, 10)
    wider = schema.__class__(**{**schema.__dict__, "columns": (*schema.columns, Column("label", "text"))})
    cql_session.execute(cql.add_column(KEYSPACE, schema.name, Column("label", "text")).text)
    cql_session.execute(cql.set_column_order(KEYSPACE, wider).text)
    cql_session.execute(f"ALTER TABLE {qualified(schema)} WITH default_time_to_live = 60")
    table = cql_session.cluster.metadata.keyspaces[KEYSPACE].tables[schema.name]
    assert table.options["comment"] == "converge columns: note weight label"
    assert table.options["default_time_to_live"] == 60
    rows = cql_session.execute(f"SELECT note FROM {qualified(schema)} WHERE org = 'o'")
    assert [r[0] for r in rows] == ["kept"]
