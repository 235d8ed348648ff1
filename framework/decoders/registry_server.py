"""A schema-registry **stand-in** for tests and ``converge stack up``: not a schema registry.

It serves the REST subset converge's client and the usual producers' serializers use, from memory,
on 127.0.0.1 only: ``GET /schemas/ids/{id}``, ``GET /subjects``, ``GET /subjects/{s}/versions``,
``GET /subjects/{s}/versions/{v|latest}``, ``POST /subjects/{s}/versions`` (registers a schema:
the same text gets the same id, in any subject, as Confluent's registry does). No compatibility
checks, no deletes, no modes, no authentication, nothing persisted: run a real registry (Confluent
Schema Registry, Apicurio, Redpanda's) anywhere else. ``hits[id]`` counts the fetches of each
schema id, so tests can check a client fetches each schema once.

``python -m framework.decoders.registry_server --port 8081`` runs one in the foreground.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

__all__ = ["RegistryStandIn"]

_ID = re.compile(r"^/schemas/ids/(\d+)$")
_VERSIONS = re.compile(r"^/subjects/([^/]+)/versions$")
_VERSION = re.compile(r"^/subjects/([^/]+)/versions/(latest|\d+)$")


class RegistryStandIn:
    """An in-memory schema-registry stand-in on ``127.0.0.1:port`` (0: any free port)."""

    def __init__(self, port: int = 0) -> None:
        self._lock = threading.Lock()
        self.schemas: dict[int, dict[str, Any]] = {}
        self.subjects: dict[str, list[int]] = {}
        self.hits: Counter[int] = Counter()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RegistryStandIn:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="registry-stand-in", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> RegistryStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def register(self, subject: str, schema: str, schema_type: str = "AVRO", references: Any = ()) -> int:
        """Register ``schema`` under ``subject``; its id (the same text: the same id)."""
        with self._lock:
            same = (
                i for i, s in self.schemas.items() if s["schema"] == schema and s["schemaType"] == schema_type
            )
            sid = next(same, 0)
            if not sid:
                sid = len(self.schemas) + 1
                self.schemas[sid] = {
                    "schema": schema,
                    "schemaType": schema_type,
                    "references": list(references),
                }
            versions = self.subjects.setdefault(subject, [])
            if sid not in versions:
                versions.append(sid)
            return sid

    # -- the REST subset ---------------------------------------------------------------------
    def answer(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        if method == "GET" and (m := _ID.match(path)):
            sid = int(m.group(1))
            with self._lock:
                self.hits[sid] += 1
                found = self.schemas.get(sid)
            if found is None:
                return 404, {"error_code": 40403, "message": "Schema not found"}
            out = {"schema": found["schema"], "references": found["references"]}
            if found["schemaType"] != "AVRO":
                out["schemaType"] = found["schemaType"]
            return 200, out
        if method == "GET" and path == "/subjects":
            return 200, sorted(self.subjects)
        if method == "GET" and (m := _VERSIONS.match(path)):
            versions = self.subjects.get(unquote(m.group(1)))
            if versions is None:
                return 404, {"error_code": 40401, "message": "Subject not found"}
            return 200, list(range(1, len(versions) + 1))
        if method == "GET" and (m := _VERSION.match(path)):
            subject = unquote(m.group(1))
            versions = self.subjects.get(subject)
            if not versions:
                return 404, {"error_code": 40401, "message": "Subject not found"}
            n = len(versions) if m.group(2) == "latest" else int(m.group(2))
            if not 1 <= n <= len(versions):
                return 404, {"error_code": 40402, "message": "Version not found"}
            s = self.schemas[versions[n - 1]]
            return 200, {"subject": subject, "version": n, "id": versions[n - 1], "schema": s["schema"],
                         "schemaType": s["schemaType"]}  # fmt: skip
        if method == "POST" and (m := _VERSIONS.match(path)):
            try:
                req = json.loads(body)
                schema, kind = req["schema"], req.get("schemaType", "AVRO")
                if not isinstance(schema, str) or kind not in ("AVRO", "JSON", "PROTOBUF"):
                    raise ValueError(kind)
            except (ValueError, KeyError, TypeError):
                return 422, {"error_code": 42201, "message": "Invalid schema"}
            return 200, {"id": self.register(unquote(m.group(1)), schema, kind, req.get("references") or ())}
        return 404, {"error_code": 404, "message": f"not served by the stand-in: {method} {path}"}


def _handler(registry: RegistryStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, answer = registry.answer(method, self.path.split("?", 1)[0], self.rfile.read(length))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a schema-registry stand-in (tests, the local stack)")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args(argv)
    server = RegistryStandIn(args.port)
    print(f"schema-registry stand-in on {server.url}", flush=True)
    try:
        server._server.serve_forever()  # noqa: SLF001 - the foreground form of start()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()  # noqa: SLF001


if __name__ == "__main__":
    main()
