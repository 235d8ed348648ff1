"""Paging: results larger than the fetch size come in pages that resume after the last row sent."""

# ruff: noqa: S608 - CQL text holds only generated table names; values are literals of the test

from __future__ import annotations

from typing import Any

from cassandra.query import SimpleStatement

from tests.cql_server.tables import qualified, timeline, upsert
from tests.support.cql_server import CqlServer


def _days(rows: Any) -> list[int]:
    return [r.day for r in rows]


def test_a_partition_read_crosses_pages(cql_server: CqlServer, cql_session: Any) -> None:
    schema = timeline(cql_session)
    for day in range(7):
        upsert(cql_session, schema, {"org": "o", "day": day, "seq": "s"}, {"note": f"n{day}"}, 10)
    statement = SimpleStatement(f"SELECT day, note FROM {qualified(schema)} WHERE org = 'o'", fetch_size=2)
    before = cql_server.requests["QUERY"]
    result = cql_session.execute(statement)
    assert len(result.current_rows) == 2 and result.has_more_pages
    assert _days(result) == list(range(7))  # iterating fetches the remaining pages
    assert cql_server.requests["QUERY"] - before == 4  # 2 + 2 + 2 + 1 rows


def test_a_page_resumes_after_its_last_row_even_when_rows_change_between_pages(cql_session: Any) -> None:
    schema = timeline(cql_session, "DESC")
    for day in range(1, 7):
        upsert(cql_session, schema, {"org": "o", "day": day, "seq": "s"}, {"note": "x"}, 10)
    statement = SimpleStatement(f"SELECT day FROM {qualified(schema)} WHERE org = 'o'", fetch_size=3)
    first = cql_session.execute(statement)
    assert _days(first.current_rows) == [6, 5, 4]
    upsert(cql_session, schema, {"org": "o", "day": 9, "seq": "s"}, {"note": "before the position"}, 10)
    upsert(cql_session, schema, {"org": "o", "day": 0, "seq": "s"}, {"note": "after the position"}, 10)
    cql_session.execute(
        f"DELETE FROM {qualified(schema)} USING TIMESTAMP 11 WHERE org = 'o' AND day = 2 AND seq = 's'"
    )
    rest = cql_session.execute(statement, paging_state=first.paging_state)
    assert _days(rest) == [3, 1, 0]


def test_limit_holds_across_pages(cql_session: Any) -> None:
    schema = timeline(cql_session)
    for day in range(10):
        upsert(cql_session, schema, {"org": "o", "day": day, "seq": "s"}, {"note": "x"}, 10)
    prepared = cql_session.prepare(
        f"SELECT day FROM {qualified(schema)} WHERE org = ? ORDER BY day DESC LIMIT ?"
    )
    prepared.fetch_size = 2
    assert _days(cql_session.execute(prepared, ("o", 5))) == [9, 8, 7, 6, 5]


def test_a_token_scan_pages_over_every_partition_once_in_token_order(cql_session: Any) -> None:
    schema = timeline(cql_session)
    for i in range(25):
        upsert(cql_session, schema, {"org": f"org{i}", "day": 1, "seq": "s"}, {"note": "x"}, 10)
        upsert(cql_session, schema, {"org": f"org{i}", "day": 2, "seq": "s"}, {"note": "x"}, 10)
    prepared = cql_session.prepare(
        f"SELECT org, day FROM {qualified(schema)} WHERE token(org) >= ? AND token(org) <= ?"
    )
    prepared.fetch_size = 4
    rows = list(cql_session.execute(prepared, (-(2**63), 2**63 - 1)))
    assert sorted((r.org, r.day) for r in rows) == sorted((f"org{i}", d) for i in range(25) for d in (1, 2))
    token_map = cql_session.cluster.metadata.token_map
    tokens = [token_map.token_class.from_key(r.org.encode()).value for r in rows]
    assert tokens == sorted(tokens)  # Cassandra's scan order: by token
