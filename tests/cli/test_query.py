"""``converge query`` against a SQLite store file: the toy task app's events run through the Driver,
its store copied cell by cell (each at its write time) into the file, then the four reads in JSON
and as tables, and bad input as one error line with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framework import Event
from framework.cli import main
from framework.core.aggregate import group_id
from framework.core.mutations import Upsert
from framework.testing.driver import Driver
from stores.open import open_wide_store
from tests.aggregates.tasks import DAY, revising_app, task_app
from tests.aggregates.test_query import TASKS

APP = task_app()
SPEC = "tests.cli.test_query:APP"
REVISING = revising_app()


async def _copy(d: Driver, url: str) -> int:
    """Every live cell of the driver's store into the store at ``url``; returns the cells copied."""
    target = await open_wide_store(url)
    writes = []
    try:
        for schema in d.app.tables:
            await target.ensure_table(schema)
            async for row in d.store.scan(schema.name):
                writes += [
                    Upsert(schema.name, dict(row.key), {n: c.value}, c.writetime)
                    for n, c in row.cells.items()
                ]
        await target.apply(writes)
    finally:
        await target.close()
    return len(writes)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{(tmp_path_factory.mktemp('query') / 'wide.db').resolve()}"
    with Driver(APP) as d:
        d.send(TASKS)
        assert d.run(_copy(d, url)) > 20
    return url


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # a usage error (argparse): exit status 2
        code = int(str(exc.code))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_four_reads_as_json(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--app", SPEC, "--wide-store", store_url, "--json"]
    code, out, _ = _run(capsys, "query", "total", "by_team_status", "--group", "team=red", "--group",
                        "status=open", *common)  # fmt: skip
    total = json.loads(out)
    assert code == 0 and total["measures"] == {"tasks": 2, "points": 8.0, "top": 5.0}
    assert total["reflects"] == 20 and total["members"] == 2 and total["final"] is None
    code, out, _ = _run(capsys, "query", "total", "due_by_team", "--group", "team=red",
                        "--window", "1970-01-10", *common)  # fmt: skip
    assert code == 0 and json.loads(out)["window"] == 9 * DAY and json.loads(out)["final"] is False
    code, out, _ = _run(capsys, "query", "windows", "due_by_team", "--group", "team=blue",
                        "--since", str(11 * DAY), "--until", "1970-01-13T00:00:01", *common)  # fmt: skip
    windows = json.loads(out)
    assert code == 0 and [w["window"] for w in windows["windows"]] == [11 * DAY, 12 * DAY]
    assert windows["reflects"] == 30
    code, out, _ = _run(capsys, "query", "top", "by_team_status", "--by", "points", "--limit", "2", *common)
    top = json.loads(out)
    assert (
        code == 0 and [g["group"]["team"] for g in top["groups"]] == ["blue", "red"] and top["scanned"] == 4
    )
    code, out, _ = _run(capsys, "query", "entity", "task", "--key", "task_id=t3", *common)
    entity = json.loads(out)
    assert code == 0 and entity["found"] and entity["reflects"] == 30
    assert entity["rows"]["task"][0]["cells"]["team"] == "blue"
    assert entity["marks"] == {"by_team_status": 30, "due_by_team": 30}


def test_tables_for_people(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--app", SPEC, "--wide-store", store_url]
    code, out, _ = _run(
        capsys, "query", "top", "due_by_team", "--by", "tasks", *common, "--now", str(100 * DAY)
    )
    assert code == 0 and "top 6 group(s) of due_by_team by tasks (6 totals rows scanned)" in out
    assert "1970-01-10T00:00:00Z .. 1970-01-12T00:00:00Z" in out
    code, out, _ = _run(capsys, "query", "total", "by_team_status", "--group", "team=pink", "--group",
                        "status=open", *common)  # fmt: skip
    assert code == 0 and "no contributions to this group" in out
    code, out, _ = _run(capsys, "query", "entity", "task", "--key", "task_id=t1", *common)
    assert code == 0 and "task: 1 row(s)" in out and "version mark of due_by_team: 10" in out


def test_revisions_of_final_windows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A window revised once after it was final: ``revisions`` in the JSON and in the table."""
    url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    with Driver(REVISING, now=11 * DAY) as d:
        d.send(TASKS)
        d.now = 20 * DAY
        assert d.send(Event("late-t1", "t1", 70, 70, "task.set", {"points": 0.5})) == []
        assert d.revisions("due_final") == {group_id(["red"], 9 * DAY): 1, group_id(["red"], 10 * DAY): 1}
        assert d.run(_copy(d, url)) > 20
    common = ["--app", "tests.cli.test_query:REVISING", "--wide-store", url, "--now", str(20 * DAY)]
    code, out, err = _run(capsys, "query", "windows", "due_final", "--group", "team=red", *common, "--json")
    assert code == 0, err
    windows = json.loads(out)["windows"]
    assert code == 0 and [(w["window"], w["final"], w["revisions"]) for w in windows] == [
        (9 * DAY, True, 1), (10 * DAY, True, 1),
    ]  # fmt: skip
    code, out, _ = _run(capsys, "query", "total", "due_final", "--group", "team=red", "--window",
                        str(10 * DAY), *common)  # fmt: skip
    head, row = [line.split() for line in out.splitlines() if line.strip()][:2]
    assert code == 0 and head[-1] == "revisions" and row[-1] == "1"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["total", "nope", "--group", "a=b"], "no aggregate 'nope'"),
        (["total", "by_team_status", "--group", "team"], "--group 'team': expected NAME=VALUE"),
        (
            ["total", "due_by_team", "--group", "team=red", "--window", "1970-01-10T01:00"],
            "not a window start",
        ),
        (["windows", "due_by_team", "--group", "team=red", "--since", "yesterday"], "not a time"),
        (["top", "by_team_status", "--by", "nope"], "no measure 'nope'"),
        (["entity", "task", "--key", "id=1"], "not a partition key column"),
        (["entity", "nope", "--key", "id=1"], "no source table"),
        (["entity", "task", "--key", "task_id=1", "--precedence", "nope=a,b"], "precedence for ['nope']"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    store_url: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "query", *argv, "--app", SPEC, "--wide-store", store_url)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1, err


def test_a_missing_store_file_is_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    code, _, err = _run(
        capsys, "query", "top", "by_team_status", "--by", "tasks", "--app", SPEC, "--wide-store", url
    )
    assert code == 2 and "does not exist" in err and not (tmp_path / "none.db").exists()
