"""``GET /metrics`` on a worker's web server, in the Prometheus text format.

Mounted by ``build_worker`` when the worker's web server is on (``web_port``
set), so it is bound where that server is: 127.0.0.1 unless configured. Like
the ack endpoint, binding beyond loopback requires a bearer token.
"""

from __future__ import annotations

import asyncio
import gc
import hmac
from typing import Any

from aiohttp import web
from prometheus_client import GC_COLLECTOR, CollectorRegistry, Gauge, Histogram, generate_latest

from framework.delivery.ack_http import guard_bind, is_loopback
from framework.metrics import names
from framework.metrics.collector import ConvergeCollector
from framework.metrics.observers import BATCH_BUCKETS, SINK_LATENCY, observe_batches, time_sinks
from framework.metrics.snapshot import Snapshot, take_snapshot

__all__ = ["METRICS_PATH", "CONTENT_TYPE", "MetricsEndpoint", "mount_metrics", "bearer_challenge"]

METRICS_PATH = "/metrics"
#: The classic text format, read by every Prometheus version (the names here are plain ASCII).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsEndpoint:
    """The metrics of one worker built by ``build_worker``: its registry and the request handler.

    Creating it gives each runtime batch-size observing counters and turns on
    sink timing, so create it before the worker starts.
    """

    def __init__(self, worker: Any, *, token: str | None = None) -> None:
        if worker.converge is None:
            raise ValueError("metrics need a worker built by build_worker (it has no wiring)")
        self.worker = worker
        self._token = token
        self._last = Snapshot()
        self._lock = asyncio.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ConvergeCollector(lambda: self._last))
        self.registry.register(SINK_LATENCY)
        self.registry.register(GC_COLLECTOR)  # python_gc_*: collections and collected objects
        frozen = Gauge(names.GC_FROZEN, "objects frozen out of garbage collection (framework.worker.heap)",
                       registry=self.registry)  # fmt: skip
        frozen.set_function(gc.get_freeze_count)
        batch_sizes = Histogram(names.BATCH_SIZE, "messages per micro-batch taken from the stream",
                                ["runtime"], buckets=BATCH_BUCKETS, registry=self.registry)  # fmt: skip
        for runtime in worker.converge.runtimes:
            observe_batches(runtime, batch_sizes.labels(runtime.name).observe)
        time_sinks()

    async def render(self) -> bytes:
        """A fresh snapshot of the worker, in the Prometheus text format."""
        async with self._lock:
            self._last = await take_snapshot(self.worker, self._last)
            return generate_latest(self.registry)

    async def handle(self, request: web.Request) -> web.Response:
        refused = bearer_challenge(request, self._token)
        if refused is not None:
            return refused
        return web.Response(body=await self.render(), headers={"Content-Type": CONTENT_TYPE})


def bearer_challenge(request: web.Request, token: str | None) -> web.Response | None:
    """The 401 answer to ``request`` when ``token`` is set and the request does not bear it."""
    if token is None:
        return None
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    challenge = {"WWW-Authenticate": 'Bearer realm="converge-metrics"'}
    return web.json_response({"error": "missing or wrong token"}, status=401, headers=challenge)


def mount_metrics(worker: Any, *, token: str | None = None, path: str = METRICS_PATH) -> MetricsEndpoint:
    """Serve ``GET path`` on the web server of ``worker`` (built by ``build_worker``, not started).

    ValueError when the server binds beyond loopback and no ``token`` is given, here or, should
    ``web_bind`` change afterwards, when the server starts (it then does not start).
    """
    bind = str(worker.conf.web_bind)
    if token is None and not is_loopback(bind):
        raise ValueError(f"serving metrics on {bind!r} requires a bearer token")
    endpoint = MetricsEndpoint(worker, token=token)
    web_driver: Any = worker.web  # faust's aiohttp driver exposes its aiohttp Application as ``web_app``
    web_driver.web_app.router.add_get(path, endpoint.handle)
    guard_bind(web_driver.web_app, worker.conf, token, "metrics")
    return endpoint
