"""The schema-registry stand-in in its own process (``framework.local_registry``), alone and in
``converge stack up``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from framework.decoders.registry import SchemaRegistry, UnknownSchema
from framework.local_process import pid_alive
from framework.local_registry import LocalRegistry


def test_the_stand_in_process_serves_and_stops(tmp_path: Path) -> None:
    with LocalRegistry(tmp_path) as registry:
        client = SchemaRegistry(registry.url)
        sid = client.register("tickets-value", '{"type": "string"}')
        assert client.get(sid).schema == '{"type": "string"}' and client.get(sid).schema_type == "AVRO"
        assert client.register("other-value", '{"type": "string"}') == sid  # same text, same id
        with pytest.raises(UnknownSchema):
            client.get(sid + 1)
        pid = registry.pid
    assert pid is not None and not pid_alive(pid)


@pytest.mark.slow
def test_converge_stack_up_starts_the_stand_in_and_down_stops_it(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "framework.cli", "stack"]
    d = ["--data-dir", str(tmp_path / "stack")]
    up = subprocess.run([*cli, "up", *d, "--no-s3"], capture_output=True, text=True, timeout=90)
    assert up.returncode == 0, up.stderr
    try:
        assert "schema registry http://127.0.0.1:" in up.stdout and "(a stand-in)" in up.stdout
        status = json.loads(subprocess.run([*cli, "status", *d, "--json"], capture_output=True, text=True,
                                           timeout=30).stdout)  # fmt: skip
        assert status["registry_url"] == f"http://127.0.0.1:{status['registry_port']}"
        assert SchemaRegistry(status["registry_url"]).register("s-value", '{"type": "long"}') == 1
    finally:
        down = subprocess.run([*cli, "down", *d], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not pid_alive(status["registry_pid"]) and not pid_alive(status["pid"])
