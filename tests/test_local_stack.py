"""The embedded stack: start, readiness, a Faust agent, graceful stop, restarts, errors, and
its S3 server (moto) with the bucket for parked segments."""

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
from framework.local_process import pid_alive, stop_pid
from framework.local_s3 import ACCESS_KEY, DLQ_BUCKET, LocalS3, LocalS3Error
from framework.local_stack import LocalStack, LocalStackError, StackInfo, es_ready, free_port, kafka_ready
from framework.worker.processes import start_worker, stop_worker
from stores.objects.store import ObjectStore


def _bucket(endpoint: str) -> ObjectStore:
    """The stack's bucket for parked segments, under a prefix of its own."""
    return ObjectStore(
        f"s3://{DLQ_BUCKET}/t", endpoint=endpoint, access_key=ACCESS_KEY, secret_key=ACCESS_KEY, attempts=1
    )


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


def test_an_owned_stack_with_s3_answers_and_stops_it(tmp_path: Path) -> None:
    with LocalStack(tmp_path / "o", s3=True) as stack:
        assert stack.info is not None and stack.info.s3_endpoint is not None and stack.info.s3_pid
        bucket = _bucket(stack.info.s3_endpoint)
        bucket.put("segments/a.seg", b"parked")  # the bucket exists: the stack created it
        assert bucket.get("segments/a.seg") == b"parked"
        assert [o.key for o in bucket.list("segments/")] == ["segments/a.seg"]
    assert not pid_alive(stack.info.s3_pid)
    with pytest.raises(Exception, match="s3://converge-dlq"):
        bucket.head("segments/a.seg")
    bucket.close()


def test_an_s3_server_that_outlives_its_noida_db_is_kept_by_the_next_start(tmp_path: Path) -> None:
    """Its objects live only in its memory: ``status`` keeps its record, ``up`` keeps it running,
    ``down`` stops it."""
    d = tmp_path / "k"
    first = LocalStack(d, s3=True, detach=True).start()
    assert first.s3_endpoint is not None and first.s3_pid is not None
    bucket = _bucket(first.s3_endpoint)
    try:
        bucket.put("segments/kept.seg", b"x" * 10)
        stop_pid(first.pid, 15)  # noida-db died
        assert LocalStack.read_state(d) is None and (d / "converge-stack.json").is_file()
        second = LocalStack(d, s3=True, detach=True).start()
        assert (second.s3_pid, second.s3_port) == (first.s3_pid, first.s3_port)
        assert LocalStack.read_state(d) == second
        assert bucket.get("segments/kept.seg") == b"x" * 10
    finally:
        bucket.close()
        assert LocalStack.stop_detached(d)
    assert not pid_alive(first.s3_pid) and not (d / "converge-stack.json").exists()


def test_s3_port_in_use_is_a_clear_error(stack: StackInfo, tmp_path: Path) -> None:
    with pytest.raises(LocalS3Error, match="in use"):
        LocalS3(tmp_path, port=stack.kafka_port).start()


def test_cli_stack_up_status_down(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "framework.cli", "stack"]
    d = ["--data-dir", str(tmp_path / "cli")]
    port = free_port()
    up = subprocess.run(
        [*cli, "up", *d, "--kafka-port", str(port), "--no-s3"], capture_output=True, text=True, timeout=60
    )
    assert up.returncode == 0, up.stderr
    assert f"127.0.0.1:{port}" in up.stdout and "s3" not in up.stdout
    status = subprocess.run([*cli, "status", *d], capture_output=True, text=True, timeout=30)
    assert status.returncode == 0 and "running" in status.stdout and "s3" not in status.stdout
    env = subprocess.run([*cli, "env", *d], capture_output=True, text=True, timeout=30)
    assert env.returncode == 0 and "CONVERGE_DLQ" not in env.stdout
    kafka_ready(f"127.0.0.1:{port}")
    down = subprocess.run([*cli, "down", *d], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and "stopped" in down.stdout
    status = subprocess.run([*cli, "status", *d], capture_output=True, text=True, timeout=30)
    assert status.returncode == 1


def test_cli_stack_env_status_json_and_restart_on_the_same_ports(tmp_path: Path) -> None:
    """``eval "$(converge stack env)"`` gives a worker its settings, the S3 server's included;
    ``restart`` keeps ports and data, and the S3 server with its objects; ``down`` stops both."""
    converge = str(Path(sys.executable).parent / "converge")
    d = ["--data-dir", str(tmp_path / "st")]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([converge, "stack", *args, *d], capture_output=True, text=True, timeout=90)

    up = run("up")
    assert up.returncode == 0 and "in memory" in up.stdout, up.stderr
    try:
        status = json.loads(run("status", "--json").stdout)
        assert status["running"] is True and status["kafka"] == f"127.0.0.1:{status['kafka_port']}"
        s3 = f"http://127.0.0.1:{status['s3_port']}"
        assert (status["s3_url"], status["s3_bucket"]) == (s3, DLQ_BUCKET) and _alive(status["s3_pid"])
        assert f"s3 {s3}" in run("status").stdout
        env = run("env")
        assert env.returncode == 0 and env.stdout.splitlines() == [
            f"export CONVERGE_BROKER=kafka://127.0.0.1:{status['kafka_port']}",
            f"export CONVERGE_ES_URL=http://127.0.0.1:{status['es_port']}",
            "export CONVERGE_ES_TOMBSTONES=document",
            f"export CONVERGE_DENYLIST_STORE=sqlite:///{(tmp_path / 'st').resolve() / 'denylist.db'}",
            "export CONVERGE_DLQ_OBJECTS=s3://converge-dlq",
            f"export CONVERGE_DLQ_S3_ENDPOINT={s3}",
            "export CONVERGE_DLQ_S3_ACCESS_KEY=test",
            "export CONVERGE_DLQ_S3_SECRET_KEY=test",
        ]
        assert json.loads(run("env", "--json").stdout)["CONVERGE_ES_TOMBSTONES"] == "document"
        script = f'eval "$({converge} stack env {d[0]} {d[1]} --dlq-prefix app7)" && {sys.executable} -c ' + (
            '\'from framework.settings import Settings; s = Settings.resolve("a"); '
            "print(s.broker, s.es_url, s.es_tombstones, s.dlq_objects, s.dlq_s3_endpoint, "
            "s.dlq_s3_access_key, s.denylist_store)'"
        )
        shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        assert shell.stdout.split() == [
            f"kafka://{status['kafka']}",
            status["es_url"],
            "document",
            "s3://converge-dlq/app7",
            s3,
            "test",
            f"sqlite:///{(tmp_path / 'st').resolve() / 'denylist.db'}",
        ], shell.stderr
        bucket = _bucket(s3)
        bucket.put("segments/p/e/s/c/1.seg", b"parked bytes")
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
        assert (after["s3_pid"], after["s3_port"]) == (status["s3_pid"], status["s3_port"])
        assert bucket.get("segments/p/e/s/c/1.seg") == b"parked bytes"
    finally:
        down = run("down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not _alive(status["s3_pid"]) and not _alive(after["pid"])
    with pytest.raises(Exception, match="s3://converge-dlq"):
        bucket.head("segments/p/e/s/c/1.seg")
    bucket.close()
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
