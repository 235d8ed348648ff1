"""The ``/query`` routes on a worker's web server.

In-process (most tests): the worker ``build_worker`` makes of the toy task app (its web port set)
with its resources opened over a SQLite store file the Driver's store was copied into, served by
aiohttp's test server (no broker: the routes only read the store). Each answer equals ``converge
query --json``'s; bad input is a 400 with a JSON error, a store not open yet a 503, and the
worker's app keeps serving after both. Live (the last test): a ``converge worker`` subprocess on a
noida-db of its own, its own totals read over HTTP."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from framework.cli import main
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack, free_port
from framework.settings import Settings
from framework.testing.driver import Driver
from framework.worker.processes import start_worker, stop_worker
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
    ("windows", {"aggregate": "due_by_team", "group.team": "blue", "until": "1d ago"},
     ["windows", "due_by_team", "--group", "team=blue", "--until", "1d ago"]),
    ("top", {"aggregate": "by_team_status", "by": "points", "limit": "3"},
     ["top", "by_team_status", "--by", "points", "--limit", "3"]),
    ("entity", {"table": "task", "key.task_id": "t2"}, ["entity", "task", "--key", "task_id=t2"]),
]  # fmt: skip

BAD: list[tuple[str, dict[str, str], str]] = [
    ("total", {"aggregate": "nope"}, "no aggregate 'nope'"),
    ("total", {"aggregate": "by_team_status", "group.team": "red"}, "grouped by"),
    ("total", {"aggregate": "due_by_team", "group.team": "red", "window": "soon"}, "window: not a time"),
    ("windows", {"group.team": "red"}, "missing parameter 'aggregate'"),
    ("windows", {"aggregate": "due_by_team", "group.team": "red", "since": "2x ago"}, "since: not a time"),
    ("top", {"aggregate": "by_team_status", "by": "points", "limit": "-1"}, "limit: not a number"),
    ("top", {"aggregate": "by_team_status", "by": "points", "colour": "x"}, "unknown parameter 'colour'"),
    ("entity", {"table": "task", "key.nope": "1"}, "not a partition key column"),
    ("entity", {"table": "nope"}, "no source table"),
    ("entity", {"table": "task", "key.task_id": "t1", "precedence.nope": "a,b"}, "precedence for ['nope']"),
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
    for (name, params, argv), (status, body) in zip(READS, answers, strict=True):
        assert status == 200, body
        assert main(["query", *argv, "--app", SPEC, "--wide-store", store_url, "--json"]) == 0
        want = json.loads(capsys.readouterr().out)
        if "ago" in params.get("until", ""):  # read a moment apart: the same time within a minute
            assert abs(dict(body).pop("until") - want.pop("until")) < 60
            body = {k: v for k, v in body.items() if k != "until"}
        assert body == want, name
    total, day9, blue, blue_until_yesterday, top, entity = (body for _, body in answers)
    assert blue_until_yesterday["windows"] and blue_until_yesterday["since"] is None
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


@pytest.mark.timeout(240)
def test_a_live_worker_answers_over_http(fresh_stack: LocalStack, tmp_path: Path) -> None:
    """Live: a noida-db of its own, a ``converge worker`` subprocess of the task app with its web
    port set, the tasks produced to its topic; polled until its totals answer, then each read."""
    assert fresh_stack.info is not None
    broker = f"kafka://{fresh_stack.info.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {t: 2 for t in APP.topics()}))
    topic = APP.agent("tasks").topic
    assert asyncio.run(produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in TASKS])) == 5
    port = free_port()
    env = {
        "CONVERGE_APP_ID": f"tasks-{uuid.uuid4().hex[:8]}",
        "CONVERGE_PARTITIONS": "2",
        "CONVERGE_WIDE_STORE": f"sqlite:///{(tmp_path / 'wide.db').resolve()}",
        "CONVERGE_WEB_PORT": str(port),
    }
    worker = start_worker("tests.aggregates.tasks:task_app", tmp_path / "worker", broker, env)
    base, log = f"http://127.0.0.1:{port}/query", tmp_path / "worker" / "worker.log"
    try:
        deadline, last = time.monotonic() + 150, ""
        while time.monotonic() < deadline:
            try:
                top = _get_json(f"{base}/top?aggregate=by_team_status&by=tasks&limit=10")
            except OSError as exc:  # not up yet, or 503 before its store is open
                last = repr(exc)
            else:
                if sum(g["measures"]["tasks"] for g in top["groups"]) == len(TASKS):  # every task counted
                    break
                last = json.dumps(top)
            time.sleep(0.5)
        else:
            raise AssertionError(f"no totals: {last}\n{log.read_text()[-3000:]}")
        red = _get_json(f"{base}/total?aggregate=by_team_status&group.team=red&group.status=open")
        assert red["measures"] == {"tasks": 2, "points": 8.0, "top": 5.0} and red["reflects"] == 20
        blue = _get_json(f"{base}/windows?aggregate=due_by_team&group.team=blue&since={11 * DAY}")
        assert [w["window"] for w in blue["windows"]] == [11 * DAY, 12 * DAY]
        entity = _get_json(f"{base}/entity?table=task&key.task_id=t5")
        assert entity["rows"]["task"][0]["cells"]["team"] == "green" and entity["reflects"] == 50
        with pytest.raises(urllib.error.HTTPError) as bad:
            _get_json(f"{base}/top?aggregate=nope&by=tasks")
        assert bad.value.code == 400 and "no aggregate" in json.loads(bad.value.read())["error"]
        assert (
            _get_json(f"{base}/top?aggregate=by_team_status&by=points&limit=1")["groups"][0]["group"]["team"]
            == "blue"
        )
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a loopback URL of the test
        return json.loads(response.read())
