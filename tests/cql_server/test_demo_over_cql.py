"""The platform demo end to end with the Cassandra adapter as its wide-column store, through this server.

The worker (a subprocess) and the demo's convergence check both reach the
server's loopback port with cassandra-driver, so the whole runtime writes and
reads over the CQL protocol instead of SQLite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.stores.harness import unique
from tests.support.cql_server import CqlServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_converges_with_the_cassandra_adapter(cql_server: CqlServer, tmp_path: Path) -> None:
    keyspace = unique("demo")
    url = f"cassandra://127.0.0.1:{cql_server.port}/{keyspace}?create_keyspace=true"
    out = subprocess.run(
        [sys.executable, "-m", "framework.cli", "demo", "--events", "1500", "--seed", "5",
         "--wide-store", url, "--workdir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if "divergent entities" in x)
    assert line.split()[-2] == "0"
    tables = cql_server.storage.catalog.keyspace(keyspace).tables
    assert {"activity_hub", "engagement_log"} <= set(tables)
    hub_rows = next(x for x in out.stdout.splitlines() if "hub rows" in x).split()[-4]
    assert int(hub_rows.replace(",", "")) > 0
