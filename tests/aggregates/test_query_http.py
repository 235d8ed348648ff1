"""The ``/query`` routes on a worker's web server, in-process: the worker ``build_worker`` makes of
the toy task app (its web port set) with its resources opened over a SQLite store file the Driver's
store was copied into, served by aiohttp's test server (no broker: the routes only read the store).
Each answer equals ``converge query --json``'s; bad input is a 400 with a JSON error, a store not
open yet a 503, and the worker's app keeps serving after both."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from framework.cli import main
from framework.settings import Settings
from framework.testing.driver import Driver
from framework.worker.wiring import build_worker
from tests.aggregates.tasks import DAY
from tests.aggregates.test_query import TASKS
from tests.cli.test_query import APP, SPEC, _copy

READS: list[tuple[str, dict[str, str], list[str]]] = [
    ("total", {"aggregate": "by_team_status", "group.team": "red", "group.status": "open"},
     ["total", "by_team_status", "--group", "team=red", "--group", "status=open"]),
    ("total", {"aggregate": "due_by_team", "group.team": "red", "window": "1970-01-10T00:00:00"},
     ["total", "due_by_team", "--group", "team=red", "--window", str(9 * DAY)]),
    ("windows", {"aggregate": "due_by_team", "group.team": "blue", "since": str(11 * DAY)},
     ["windows", "due_by_team", "--group", "team=blue", "--since", str(11 * DAY)]),
    ("top", {"aggregate": "by_team_status", "by": "points", "limit": "3"},
     ["top", "by_team_status", "--by", "points", "--limit", "3"]),
    ("entity", {"table": "task", "key.task_id": "t2"}, ["entity", "task", "--key", "task_id=t2"]),
]  # fmt: skip

BAD: list[tuple[str, dict[str, str], str]] = [
    ("total", {"aggregate": "nope"}, "no aggregate 'nope'"),
    ("total", {"aggregate": "by_team_status", "group.team": "red"}, "grouped by"),
    ("total", {"aggregate": "due_by_team", "group.team": "red", "window": "soon"}, "window: not a time"),
    ("windows", {"group.team": "red"}, "missing parameter 'aggregate'"),
    ("top", {"aggregate": "by_team_status", "by": "points", "limit": "-1"}, "limit: not a number"),
    ("top", {"aggregate": "by_team_status", "by": "points", "colour": "x"}, "unknown parameter 'colour'"),
    ("entity", {"table": "task", "key.nope": "1"}, "not a partition key column"),
    ("entity", {"table": "nope"}, "no source table"),
]


def _worker(tmp_path: Path, url: str) -> Any:
    settings = Settings.resolve("tasks", data_dir=tmp_path / "w", broker="kafka://127.0.0.1:1",
                                wide_store=url, web_port=16067)  # fmt: skip
    return build_worker(APP, settings)


async def _ask(
    worker: Any, requests: list[tuple[str, dict[str, str]]], *, open_store: bool = True
) -> list[Any]:
    """Each request's (status, JSON body), served by the worker's aiohttp app on one event loop."""
    out = []
    if open_store:
        await worker.converge.resources.open()
    try:
        async with TestClient(TestServer(worker.web.web_app)) as client:
            for name, params in requests:
                response = await client.get(f"/query/{name}", params=params)
                assert response.content_type == "application/json"
                out.append((response.status, await response.json()))
    finally:
        await worker.converge.resources.close()
    return out


@pytest.fixture()
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    with Driver(APP) as d:
        d.send(TASKS)
        assert d.run(_copy(d, url)) > 20
    return url


def test_each_route_answers_what_the_cli_answers(
    tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = asyncio.run(_ask(_worker(tmp_path, store_url), [(n, p) for n, p, _ in READS]))
    for (name, _, argv), (status, body) in zip(READS, answers, strict=True):
        assert status == 200, body
        assert main(["query", *argv, "--app", SPEC, "--wide-store", store_url, "--json"]) == 0
        assert body == json.loads(capsys.readouterr().out), name
    total, day9, blue, top, entity = (body for _, body in answers)
    assert total["measures"] == {"tasks": 2, "points": 8.0, "top": 5.0} and total["reflects"] == 20
    assert day9["window"] == 9 * DAY and day9["final"] is False
    assert [w["window"] for w in blue["windows"]] == [11 * DAY, 12 * DAY]
    assert [g["measures"]["points"] for g in top["groups"]] == [9.0, 8.0, 2.0]
    assert entity["found"] and entity["reflects"] == 20


def test_bad_input_is_a_400_and_the_worker_goes_on(tmp_path: Path, store_url: str) -> None:
    asked = [(n, p) for n, p, _ in BAD] + [(n, p) for n, p, _ in READS[:1]]
    answers = asyncio.run(_ask(_worker(tmp_path, store_url), asked))
    for (name, _, message), (status, body) in zip(BAD, answers[: len(BAD)], strict=True):
        assert status == 400 and message in body["error"] and "\n" not in body["error"], (name, body)
    assert answers[-1][0] == 200 and answers[-1][1]["found"]


def test_before_the_store_is_open_a_503(tmp_path: Path, store_url: str) -> None:
    [(status, body)] = asyncio.run(
        _ask(_worker(tmp_path, store_url), [("top", {"aggregate": "x", "by": "y"})], open_store=False)
    )
    assert status == 503 and "not open" in body["error"]


def test_the_routes_are_mounted_only_with_a_web_port(tmp_path: Path, store_url: str) -> None:
    routes = {r.resource.canonical for r in _worker(tmp_path, store_url).web.web_app.router.routes()}
    assert {"/query/total", "/query/windows", "/query/top", "/query/entity", "/metrics"} <= routes
    settings = Settings.resolve(
        "tasks", data_dir=tmp_path / "x", broker="kafka://127.0.0.1:1", wide_store=store_url
    )
    quiet = build_worker(APP, settings)
    assert all(not r.resource.canonical.startswith("/query") for r in quiet.web.web_app.router.routes())
