"""The embedded stack: start, readiness, a Faust agent, graceful stop, restarts, errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack, LocalStackError, StackInfo, es_ready, free_port, kafka_ready
from framework.worker.processes import start_worker, stop_worker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_session_stack_answers_both_protocols(stack: StackInfo) -> None:
    assert es_ready(stack.es_url)["tagline"]
    kafka_ready(stack.kafka_bootstrap)
    assert stack.host == "127.0.0.1"


def test_start_stop_and_second_start_on_new_ports(tmp_path: Path) -> None:
    first = LocalStack(tmp_path / "a")
    info = first.start()
    kafka_ready(info.kafka_bootstrap)
    first.stop()
    assert not _alive(info.pid)
    with pytest.raises(OSError):
        es_ready(info.es_url, timeout=1)
    with LocalStack(tmp_path / "b") as second:
        assert second.info is not None
        assert second.info.pid != info.pid
        assert es_ready(second.info.es_url)
    assert not _alive(second.info.pid)


def test_graceful_stop_keeps_recent_writes(tmp_path: Path) -> None:
    """SIGINT lets noida-db save what was just written: the topic survives a restart."""
    s = LocalStack(tmp_path / "s")
    info = s.start()
    broker = f"kafka://{info.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {"keep": 1}))
    asyncio.run(produce(broker, "keep", [(b"k", b"v%d" % i) for i in range(50)]))
    s.restart()
    from framework.kafka_admin import end_offsets

    assert asyncio.run(end_offsets(broker, "keep")) == {0: 50}
    s.stop()


def test_wrong_binary_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LocalStackError, match="binary not found"):
        LocalStack(tmp_path, binary=tmp_path / "nope").start()


def test_port_in_use_is_a_clear_error(stack: StackInfo, tmp_path: Path) -> None:
    with pytest.raises(LocalStackError, match="in use"):
        LocalStack(tmp_path, kafka_port=stack.kafka_port).start()


def test_binary_that_exits_at_once_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "fake-noida"
    fake.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(LocalStackError, match="exited with code 3"):
        LocalStack(tmp_path / "d", binary=fake, startup_timeout=5).start()


def test_no_orphan_when_the_owner_is_killed(tmp_path: Path) -> None:
    """A parent killed with SIGKILL takes noida-db down with it (parent-death signal)."""
    code = (
        "import sys, time; from framework.local_stack import LocalStack;"
        f"i = LocalStack({str(tmp_path / 'o')!r}).start(); print(i.pid, flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    assert _alive(pid)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)


def test_cli_stack_up_status_down(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "framework.cli", "stack"]
    d = ["--data-dir", str(tmp_path / "cli")]
    port = free_port()
    up = subprocess.run(
        [*cli, "up", *d, "--kafka-port", str(port)], capture_output=True, text=True, timeout=60
    )
    assert up.returncode == 0, up.stderr
    assert f"127.0.0.1:{port}" in up.stdout
    status = subprocess.run([*cli, "status", *d], capture_output=True, text=True, timeout=30)
    assert status.returncode == 0 and "running" in status.stdout
    kafka_ready(f"127.0.0.1:{port}")
    down = subprocess.run([*cli, "down", *d], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and "stopped" in down.stdout
    status = subprocess.run([*cli, "status", *d], capture_output=True, text=True, timeout=30)
    assert status.returncode == 1


def test_cli_stack_env_status_json_and_restart_on_the_same_ports(tmp_path: Path) -> None:
    """``eval "$(converge stack env)"`` gives a worker its settings; ``restart`` keeps ports and data."""
    converge = str(Path(sys.executable).parent / "converge")
    d = ["--data-dir", str(tmp_path / "st")]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([converge, "stack", *args, *d], capture_output=True, text=True, timeout=90)

    assert run("up").returncode == 0
    try:
        status = json.loads(run("status", "--json").stdout)
        assert status["running"] is True and status["kafka"] == f"127.0.0.1:{status['kafka_port']}"
        env = run("env")
        assert env.returncode == 0 and env.stdout.splitlines() == [
            f"export CONVERGE_BROKER=kafka://127.0.0.1:{status['kafka_port']}",
            f"export CONVERGE_ES_URL=http://127.0.0.1:{status['es_port']}",
            "export CONVERGE_ES_TOMBSTONES=document",
        ]
        assert json.loads(run("env", "--json").stdout)["CONVERGE_ES_TOMBSTONES"] == "document"
        script = f'eval "$({converge} stack env {d[0]} {d[1]})" && {sys.executable} -c ' + (
            '\'from framework.settings import Settings; s = Settings.resolve("a"); '
            "print(s.broker, s.es_url, s.es_tombstones)'"
        )
        shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        assert shell.stdout.split() == [f"kafka://{status['kafka']}", status["es_url"], "document"], (
            shell.stderr
        )
        broker = f"kafka://{status['kafka']}"
        asyncio.run(ensure_topics(broker, {"kept": 1}))
        asyncio.run(produce(broker, "kept", [(b"k", b"v%d" % i) for i in range(30)]))
        restarted = run("restart")
        assert restarted.returncode == 0, restarted.stderr
        after = json.loads(run("status", "--json").stdout)
        assert after["pid"] != status["pid"] and not _alive(status["pid"])
        assert (after["kafka_port"], after["es_port"]) == (status["kafka_port"], status["es_port"])
        from framework.kafka_admin import end_offsets

        assert asyncio.run(end_offsets(broker, "kept")) == {0: 30}  # the data survived the restart
        assert es_ready(after["es_url"])
    finally:
        down = run("down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert json.loads(run("status", "--json").stdout) == {"running": False}
    gone = run("restart")
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1 and "no stack runs" in gone.stderr


def test_cli_help_lists_subcommands() -> None:
    out = subprocess.run([sys.executable, "-m", "framework.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for name in ("stack", "worker", "demo"):
        assert name in out.stdout


def test_faust_agent_consumes_a_produced_topic(stack: StackInfo, tmp_path: Path) -> None:
    """A plain Faust worker (the smoke app) consumes and commits everything produced."""
    broker = f"kafka://{stack.kafka_bootstrap}"
    topic, group = "smoke-test-in", "smoke-test"
    asyncio.run(ensure_topics(broker, {topic: 2}))
    env = {"SMOKE_TOPIC": topic, "SMOKE_APP_ID": group}
    proc = start_worker("examples.smoke:build", tmp_path / "w", broker, env)
    try:
        records = [(b"k%d" % (i % 7), json.dumps({"i": i}).encode()) for i in range(500)]
        asyncio.run(produce(broker, topic, records))
        assert asyncio.run(wait_drained(broker, group, topic, timeout=60))
    finally:
        assert stop_worker(proc) == 0
    counted = (tmp_path / "w" / "smoke-count.txt").read_text().split()
    assert int(counted[0]) == 500
