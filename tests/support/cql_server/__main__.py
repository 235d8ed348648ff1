"""Run the CQL test server standalone: ``python -m tests.support.cql_server --port 9042``.

Prints ``PORT <n>`` once listening (so a script can read the chosen port when
``--port 0``), then serves until interrupted. Data lives in memory only.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from tests.support.cql_server.server import CqlServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cql_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default 0: a free port)")
    args = parser.parse_args(argv)
    server = CqlServer(args.host, args.port).start()
    print(f"PORT {server.port}", flush=True)
    print(f"cassandra://{args.host}:{server.port}/converge?create_keyspace=true", file=sys.stderr, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
