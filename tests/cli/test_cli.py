"""The ``converge`` CLI's shared rules: times, SQLite URLs, one-line errors, plugins, the DLQ default
and ``converge worker`` of an app package in its own directory (a real worker on noida-db)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import framework.cli as framework_cli
from framework.cli.common import UserError, parse_duration, parse_time, run_command
from framework.cli.dlq import dlq_root
from framework.coordination import open_checkpoint_store
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import StackInfo, die_with_parent
from framework.worker.processes import stop_worker
from stores.open import open_wide_store, sqlite_path, sqlite_url

CONVERGE = str(Path(sys.executable).parent / "converge")  # the console script: the cwd is NOT on sys.path
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def _env(**extra: str) -> dict[str, str]:
    """The environment without any CONVERGE_* setting, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")}, **extra}


def _converge(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CONVERGE, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=120
    )


# -- times -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2023-11-14T22:13:20", NOW),  # naive = UTC
        ("2023-11-14T23:13:20+01:00", NOW),
        ("2023-11-14", NOW - 80_000),
        ("1700000000", NOW),
        ("1700000000.5", NOW + 0.5),
        ("2h ago", NOW - 7200),
        ("30m ago", NOW - 1800),
        ("7d ago", NOW - 7 * 86400),
        ("1.5h ago", NOW - 5400),
        ("90 ago", NOW - 90),
        ("now", NOW),
    ],
)
def test_one_time_rule_iso_epoch_seconds_or_ago(text: str, seconds: float) -> None:
    assert parse_time(text, now=NOW) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("yesterday", "not a time: 'yesterday'"),
        ("2x ago", "not a time"),
        ("", "not a time"),
        ("-5", "epoch SECONDS"),
        ("1700000000000000", "epoch SECONDS"),  # microseconds, the delivery command's old unit
        ("2h", "not a time"),  # a duration is not a time: "2h ago"
    ],
)
def test_bad_times_are_refused_with_the_accepted_forms(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=says) as raised:
        parse_time(text, now=NOW)
    assert "ago" in str(raised.value) or "SECONDS" in str(raised.value)


def test_durations() -> None:
    assert [parse_duration(t) for t in ("90", "30s", "15m", "2h", "7d", "1w", "0")] == [
        90, 30, 900, 7200, 604800, 604800, 0,
    ]  # fmt: skip
    for bad in ("-1", "2 hours", "inf", "nan", "h"):
        with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
            parse_duration(bad)


# -- the SQLite URL rule -----------------------------------------------------------------------------


def test_sqlite_urls_follow_sqlalchemy_relative_and_absolute(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///var/x.db") == Path("var/x.db")  # relative to the working directory
    assert sqlite_path("sqlite:////var/x.db") == Path("/var/x.db")
    assert sqlite_path(sqlite_url(tmp_path / "a.db")) == tmp_path / "a.db"
    assert (
        sqlite_url(Path("rel/a.db")) == "sqlite:///rel/a.db"
        and sqlite_path("sqlite:///rel/a.db").parts[0] == "rel"
    )
    for bad in ("sqlite://", "sqlite:///", "sqlite://host/x.db", "sqlite:x.db", "postgres:///x", "/x.db"):
        with pytest.raises(ValueError, match="sqlite:///relative/path or sqlite:////absolute/path"):
            sqlite_path(bad)


async def test_stores_and_checkpoints_open_the_same_file_for_the_same_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_wide_store("sqlite:///rel/wide.db")  # relative: under the working directory
    await store.close()
    cp = open_checkpoint_store("sqlite:///rel/cp/checkpoints.db")
    await cp.close()
    absolute = tmp_path / "abs" / "cp.db"
    cp = open_checkpoint_store(sqlite_url(absolute))  # sqlite:////tmp/...
    await cp.close()
    assert (tmp_path / "rel" / "wide.db").is_file() and (tmp_path / "rel" / "cp" / "checkpoints.db").is_file()
    assert absolute.is_file()


# -- errors: one line, never a traceback ----------------------------------------------------------------


def test_the_error_wrapper(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fails(exc: BaseException) -> object:
        def run(_: argparse.Namespace) -> int:
            raise exc

        return run

    ns = argparse.Namespace()
    assert run_command(fails(UserError("give --root\nor --app")), ns, "converge dlq list") == 2  # type: ignore[arg-type]
    assert capsys.readouterr().err == "converge dlq list: error: give --root or --app\n"
    assert run_command(fails(FileNotFoundError(2, "No such file", "x.db")), ns, "converge x") == 1  # type: ignore[arg-type]
    assert capsys.readouterr().err == "converge x: error: [Errno 2] No such file: 'x.db'\n"
    assert run_command(fails(RuntimeError("boom")), ns, "converge x") == 1  # type: ignore[arg-type]
    assert capsys.readouterr().err == (
        "converge x: error: RuntimeError: boom (set CONVERGE_DEBUG=1 for the traceback)\n"
    )
    assert run_command(fails(SystemExit("converge x: stop")), ns, "converge x") == 1  # type: ignore[arg-type]
    assert capsys.readouterr().err == "converge x: error: stop\n"
    monkeypatch.setenv("CONVERGE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        run_command(fails(RuntimeError("boom")), ns, "converge x")  # type: ignore[arg-type]


def test_user_errors_are_one_line_on_stderr_with_a_nonzero_exit(tmp_path: Path) -> None:
    cases = [
        (
            ["worker", "nosuch.app:app"],
            "converge worker: error: app nosuch.app:app: no module named 'nosuch'",
        ),
        (
            ["worker", "json:nope"],
            "converge worker: error: app json:nope: module 'json' has no attribute 'nope'",
        ),
        (["dlq", "list", "--root", "nowhere"], "converge dlq list: error: no dead-letter WAL at nowhere"),
        (["dlq", "list", "--since", "yesterday"], "converge dlq list: error: argument --since: not a time"),
        (
            ["delivery", "report", "--wide-store", "sqlite:///none.db"],
            "error: --wide-store: none.db does not",
        ),
        (["stack", "env", "--data-dir", "nostack"], "converge stack env: error: no stack runs from nostack"),
    ]
    for args, says in cases:
        done = _converge(*args, cwd=tmp_path)
        assert done.returncode != 0 and done.stdout == "", (args, done)
        assert done.stderr.count("\n") == 1 and says in done.stderr, (args, done.stderr)


# -- plugins -------------------------------------------------------------------------------------------


def test_commands_come_from_entry_points_and_a_broken_one_is_one_warning(tmp_path: Path) -> None:
    """A real distribution on PYTHONPATH (a dist-info directory) adds a working and a broken command."""
    plugins = tmp_path / "plugins"
    (plugins / "hello_plugin-0.1.dist-info").mkdir(parents=True)
    (plugins / "hello_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hello-plugin\nVersion: 0.1\n"
    )
    (plugins / "hello_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[converge.commands]\nhello = hello_plugin:register\nbroken = no_such_module_xyz:register\n"
    )
    (plugins / "hello_plugin.py").write_text(
        textwrap.dedent("""
        def register(sub):
            p = sub.add_parser("hello", help="say hello")
            p.add_argument("--name", default="world")
            p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)
    """)
    )
    done = _converge("hello", "--name", "plugin", cwd=tmp_path, PYTHONPATH=str(plugins))
    assert done.returncode == 0 and done.stdout == "hello plugin\n"
    assert (
        done.stderr.count("\n") == 1
        and "warning: command 'broken' (no_such_module_xyz:register)" in done.stderr
    )
    helped = _converge("--help", cwd=tmp_path, PYTHONPATH=str(plugins))
    assert helped.returncode == 0
    for name in (
        "stack",
        "worker",
        "dlq",
        "delivery",
        "spark",
        "demo",
        "hello",
    ):  # built in: stack, worker, dlq, delivery, spark; plugins: demo, hello
        assert f"    {name} " in helped.stdout, name


def test_one_module_per_command_named_as_the_command_and_the_help_lists_them() -> None:
    """Every module of ``framework.cli`` but the shared ones registers the command of its name,
    and the top-level help lists exactly the registered commands (built-in, then plugins)."""
    from importlib.metadata import entry_points

    from framework.cli import COMMANDS, PLUGIN_GROUP, build_parser

    # spark_changes: ``spark changes``; job_turn: what ``retention run`` and ``idmap run`` open
    shared = {"__init__", "__main__", "common", "job_turn", "spark_changes"}
    files = {p.stem for p in Path(framework_cli.__file__).parent.glob("*.py")} - shared
    assert {m.__name__.rpartition(".")[2] for m in COMMANDS} == files
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    plugins = {ep.name for ep in entry_points(group=PLUGIN_GROUP)}
    assert set(sub.choices) == files | plugins
    listed = [line.split()[0] for line in parser.format_help().splitlines() if line.startswith("    ")]
    assert [name for name in listed if name in sub.choices] == list(sub.choices)


# -- the dead-letter WAL of an app ------------------------------------------------------------------------


def test_dlq_root_is_the_workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("CONVERGE_DLQ_ROOT", "CONVERGE_DATA_DIR", "CONVERGE_APP_ID"):
        monkeypatch.delenv(var, raising=False)

    def root(root: str | None = None, app: str | None = None) -> Path:
        return dlq_root(argparse.Namespace(root=root, app=app))

    app = "examples.support_desk.app:app"  # App("support-desk", ...)
    assert root(app=app) == Path("var/support-desk/dlq")
    assert root("mine", app) == Path("mine")
    with pytest.raises(UserError, match="give --root DIR or --app MODULE:ATTR"):
        root()
    monkeypatch.setenv("CONVERGE_APP_ID", "other")
    assert root() == Path("var/other/dlq") and root(app=app) == Path("var/other/dlq")  # env beats the name
    monkeypatch.setenv("CONVERGE_DATA_DIR", str(tmp_path / "data"))
    assert root(app=app) == tmp_path / "data" / "dlq"
    monkeypatch.delenv("CONVERGE_APP_ID")
    assert root() == tmp_path / "data" / "dlq"
    monkeypatch.setenv("CONVERGE_DLQ_ROOT", str(tmp_path / "wal"))
    assert root() == root(app=app) == tmp_path / "wal"
    with pytest.raises(UserError, match="not a converge App"):
        root(app="os:sep")


# -- converge worker: an app package in its own directory --------------------------------------------


APP = """
import os
from typing import ClassVar

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert

NOTE = TableSchema("note", partition_key=(Column("id", "text"),), columns=(Column("body", "text"),))


class NoteAgent(KeyedAgent):
    name: ClassVar[str] = "notes"
    topic: ClassVar[str] = os.environ["NOTES_TOPIC"]
    event_types: ClassVar[tuple[str, ...]] = ("note.written",)
    tables: ClassVar[tuple[TableSchema, ...]] = (NOTE,)

    def handle(self, event: Event):
        return [Upsert("note", {"id": event.payload["id"]}, {"body": event.payload["body"]}, event.version)]


app = App(os.environ["NOTES_APP"], agents=[NoteAgent()])
"""


def test_worker_runs_an_app_package_from_its_directory_with_flags_as_settings(
    stack: StackInfo, tmp_path: Path
) -> None:
    """The flags are the settings: the relative SQLite URL lands in the app's directory, the data dir
    defaults to var/<app id> there, and ``converge dlq --app`` finds what the worker parked."""
    from framework import Event

    project = tmp_path / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "app.py").write_text(APP)
    name, topic = f"notes-{uuid.uuid4().hex[:8]}", f"notes-in-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 1}))
    events = [
        Event(f"e{i}", f"k{i}", 10 + i, 10 + i, "note.written", {"id": f"n{i}", "body": f"b{i}"})
        for i in range(3)
    ]
    records = [(e.ordering_key.encode(), e.to_json()) for e in events] + [(b"k9", b"not json")]
    asyncio.run(produce(broker, topic, records))
    env = _env(NOTES_APP=name, NOTES_TOPIC=topic, PYTHONPATH="")
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [CONVERGE, "worker", "mypkg.app:app", "--broker", broker, "--wide-store", "sqlite:///state/wide.db",
         "--partitions", "1"],
        cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,  # noqa: PLW1509
    )  # fmt: skip
    try:
        assert asyncio.run(wait_drained(broker, name, topic, 120)), (tmp_path / "worker.log").read_text()
    finally:
        code = stop_worker(proc)
        log.close()
    assert code == 0, (tmp_path / "worker.log").read_text()[-3000:]

    async def rows() -> dict[str, str]:
        store = await open_wide_store("sqlite:///" + str(project / "state" / "wide.db"))
        try:
            return {r.key["id"]: r.values()["body"] async for r in store.scan("note")}  # type: ignore[misc]
        finally:
            await store.close()

    assert asyncio.run(rows()) == {"n0": "b0", "n1": "b1", "n2": "b2"}
    listed = _converge("dlq", "list", "--json", "--app", "mypkg.app:app", cwd=project, NOTES_APP=name,
                       NOTES_TOPIC=topic)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [(g["stage"], g["live"]) for g in json.loads(listed.stdout)] == [("parse", 1)]
    assert (project / "var" / name / "dlq" / "index.sqlite3").is_file()


def test_worker_refuses_an_unknown_gc_mode_before_loading_the_app(tmp_path: Path) -> None:
    """``--gc`` and ``CONVERGE_GC`` take ``freeze`` or ``default``; anything else is a one-line error."""
    flag = _converge("worker", "nosuchmodule:app", "--gc", "never", cwd=tmp_path)
    assert flag.returncode == 2 and "invalid choice: 'never'" in flag.stderr
    env = _converge("worker", "nosuchmodule:app", cwd=tmp_path, CONVERGE_GC="never")
    assert env.returncode == 2, env.stderr
    assert "CONVERGE_GC: one of freeze, default, not 'never'" in env.stderr
    assert "Traceback" not in env.stderr
