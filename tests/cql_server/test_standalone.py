"""``python -m tests.support.cql_server`` serves on the port it prints and stops on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support.cql_server.fixtures import connect_cluster

ROOT = Path(__file__).resolve().parents[2]


def test_the_standalone_server_prints_its_port_serves_and_stops() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.cql_server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[0] == "PORT"
        port = int(line[1])
        cluster = connect_cluster(port)
        try:
            assert cluster.connect().execute("SELECT rpc_port FROM system.local").one()[0] == port
        finally:
            cluster.shutdown()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
