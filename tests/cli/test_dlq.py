"""``converge dlq``: tables, filters, time parsing, and replay as a real subprocess against noida-db."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from framework.cli import main
from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.offload import open_objects
from framework.local_stack import StackInfo
from framework.settings import Settings
from tests.dlq.kafka_support import new_topic, read_topic
from tests.dlq.support import FakeClock, rec
from tests.dlq.test_crash import REPO, _run_and_kill


def _fill(root: Path) -> None:
    clock = FakeClock(1_700_000_000.0)
    with DeadLetterWAL(root, clock=clock) as wal:
        for i in range(6):
            clock.tick(60)
            wal.park_sync(rec(i, event_type="[red]x\x1b[2J" if i == 5 else "signup", error_class=f"E{i % 2}"))


def test_list_show_discard_export_import_cleanup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, other = tmp_path / "wal", tmp_path / "other"
    _fill(root)
    assert main(["dlq", "list", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "signup" in out and "E0" in out and "E1" in out
    assert "\x1b" not in out and "[red]x\\x1b[2J" in out  # event data cannot style or drive the terminal
    assert main(["dlq", "list", "--root", str(root), "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)
    assert sorted((g["event_type"], g["error_class"], g["live"]) for g in groups) == [
        ("[red]x\x1b[2J", "E1", 1), ("signup", "E0", 3), ("signup", "E1", 2),
    ]  # fmt: skip
    until = "2023-11-14T22:15:00"  # only offset 0 (parked at 1_700_000_060) is earlier
    assert main(["dlq", "list", "--root", str(root), "--json", "--segments", "--until", until]) == 0
    assert [(s["error_class"], s["records"]) for s in json.loads(capsys.readouterr().out)] == [("E0", 3)]

    assert main(["dlq", "show", "--root", str(root), "--json", "--error-class", "E1", "--limit", "2"]) == 0
    assert [json.loads(x)["offset"] for x in capsys.readouterr().out.splitlines()] == [1, 3]
    since = "2023-11-14T22:16:20"  # parked_at of offsets 2.. (1_700_000_000 + 60 * (i + 1))
    assert main(["dlq", "show", "--root", str(root), "--json", "--since", since]) == 0
    assert [json.loads(x)["offset"] for x in capsys.readouterr().out.splitlines()] == [2, 3, 4, 5]

    assert main(["dlq", "discard", "--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        "converge dlq discard: error: give a filter, or --all to discard every sealed segment\n"
    )
    assert main(["dlq", "discard", "--root", str(root), "--error-class", "E0", "--dry-run"]) == 0
    assert "would discard 3 records" in capsys.readouterr().out
    assert main(["dlq", "discard", "--root", str(root), "--error-class", "E0"]) == 0
    assert "discarded 3 records in 1 segments" in capsys.readouterr().out

    dump = tmp_path / "e1.jsonl"
    assert main(["dlq", "export", "--root", str(root), "--out", str(dump)]) == 0
    assert main(["dlq", "import", "--root", str(other), str(dump)]) == 0
    assert [e.record.offset for e in DeadLetterStore(other).ordered()] == [1, 3, 5]

    assert main(["dlq", "cleanup", "--root", str(root), "--grace", "0"]) == 0
    assert "deleted 1 replayed/discarded segments" in capsys.readouterr().out
    assert {s.partition.error_class for s in DeadLetterStore(root).segments()} == {"E1"}

    assert main(["dlq", "list", "--root", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err == f"converge dlq list: error: no dead-letter WAL at {tmp_path / 'nowhere'}\n"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", "dlq", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip


async def test_cli_replays_what_a_killed_worker_parked(stack: StackInfo, tmp_path: Path) -> None:
    """Segments a SIGKILLed writer left open are sealed by the CLI and replayed in order."""
    root = tmp_path / "wal"
    acked = _run_and_kill(root, "loop", acks_before_kill=40)
    target = await new_topic(stack.kafka_bootstrap, "dlq-cli")
    done = _cli("replay", "--root", str(root), "--broker", stack.kafka_bootstrap, "--topic", target)
    n = int(done.stdout.split()[1])
    assert n >= len(acked)
    values = [m.value for m in await read_topic(stack.kafka_bootstrap, target)]
    assert values[: len(acked)] == [b"\x00\xff" * (i % 7) for i in acked]
    assert {s.status for s in DeadLetterStore(root).segments()} == {Status.REPLAYED}


async def test_cli_leaves_a_live_writers_open_segment_alone(stack: StackInfo, tmp_path: Path) -> None:
    target = await new_topic(stack.kafka_bootstrap, "dlq-live")
    with DeadLetterWAL(tmp_path, max_segment_bytes=600) as wal:
        for i in range(5):
            wal.park_sync(rec(i))
        sealed = sum(s.count for s in wal.segments(SegmentFilter(statuses=(Status.SEALED,))))
        done = _cli("replay", "--root", str(tmp_path), "--broker", stack.kafka_bootstrap, "--topic", target)
        assert f"replayed {sealed} records" in done.stdout and "1 open segments left out" in done.stdout
        assert [s.status for s in wal.segments()][-1] is Status.OPEN
        wal.park_sync(rec(5))  # the writer goes on undisturbed
    assert len(await read_topic(stack.kafka_bootstrap, target)) == sealed


def _status(argv: list[str]) -> int | str | None:
    """The exit status of ``converge`` with ``argv`` (argument errors exit from argparse)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_bad_arguments_are_one_line_errors_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "wal"
    _fill(root)
    missing = tmp_path / "missing"
    cases = [
        ("show", ["--limit", "-1"], "argument --limit: must be at least 1, got -1"),
        ("show", ["--limit", "0"], "argument --limit: must be at least 1, got 0"),
        ("show", ["--limit", "many"], "argument --limit: not an integer: 'many'"),
        ("list", ["--since", "last tuesday"], "argument --since: not a time: 'last tuesday'"),
        (
            "export",
            ["--out", str(missing / "x.jsonl")],
            f"argument --out: directory '{missing}' does not exist",
        ),
        ("export", ["--out", str(tmp_path)], f"argument --out: '{tmp_path}' is a directory"),
        ("import", [str(tmp_path / "nope.jsonl")], f"no such file: {tmp_path / 'nope.jsonl'}"),
    ]
    for cmd, extra, message in cases:
        assert _status(["dlq", cmd, "--root", str(root), *extra]) == 2, (cmd, extra)
        err = capsys.readouterr().err
        assert err.startswith(f"converge dlq {cmd}: error: {message}") and err.count("\n") == 1, err
    assert not missing.exists()


def test_export_never_follows_a_file_planted_at_its_temporary_name(tmp_path: Path) -> None:
    """The old temporary name was predictable (``.NAME.tmp-PID``); a symlink there redirected the write."""
    root, victim, out = tmp_path / "wal", tmp_path / "victim.txt", tmp_path / "out.jsonl"
    _fill(root)
    victim.write_text("precious\n")
    planted = tmp_path / f".out.jsonl.tmp-{os.getpid()}"
    planted.symlink_to(victim)
    assert main(["dlq", "export", "--root", str(root), "--out", str(out)]) == 0
    assert victim.read_text() == "precious\n"
    assert not out.is_symlink() and len(out.read_text().splitlines()) == 7
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert planted.is_symlink()  # not ours: left alone
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([planted.name, out.name, victim.name, "wal"])


def test_every_command_reaches_every_hosts_parked_events_in_the_bucket(
    converge_s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    env = {
        "CONVERGE_DLQ_OBJECTS": f"s3://converge-cli/{tmp_path.name}", "CONVERGE_DLQ_S3_ENDPOINT": converge_s3,
        "CONVERGE_DLQ_S3_ACCESS_KEY": "test", "CONVERGE_DLQ_S3_SECRET_KEY": "test",
    }  # fmt: skip
    objects = open_objects(Settings.resolve("app", env=env))
    assert objects is not None
    objects.ensure_bucket()
    for host, offsets in (("a", range(0, 3)), ("b", range(3, 5))):
        with DeadLetterWAL(tmp_path / host, objects=objects) as wal:
            for i in offsets:
                wal.park_sync(rec(i, pipeline=f"p{host}"))
        shutil.rmtree(tmp_path / host)  # the hosts are gone
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["dlq", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["pipeline"], r["live"]) for r in rows) == [("pa", 3), ("pb", 2)]
    assert main(["dlq", "show", "--json"]) == 0
    assert sorted(json.loads(x)["offset"] for x in capsys.readouterr().out.splitlines()) == [0, 1, 2, 3, 4]
    assert main(["dlq", "verify"]) == 0
    out = tmp_path / "all.jsonl"
    assert main(["dlq", "export", "--out", str(out)]) == 0
    assert main(["dlq", "discard", "--pipeline", "pa"]) == 0
    assert "discarded 3 records in 1 segments" in capsys.readouterr().out
    assert main(["dlq", "cleanup", "--grace", "0s"]) == 0
    assert "deleted 1 replayed/discarded segments" in capsys.readouterr().out
    assert main(["dlq", "import", str(out)]) == 0  # parked again, into the bucket
    assert "imported 5 records into s3://converge-cli/" in capsys.readouterr().out
    assert main(["dlq", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["pipeline"], r["live"]) for r in rows) == [("pa", 3), ("pb", 4)]
    assert main(["dlq", "list", "--root", str(tmp_path / "none")]) == 2  # --root: a local WAL only
