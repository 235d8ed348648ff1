"""``GET /metrics`` of the standalone change verifier (``converge verify --metrics-port``).

The same ``converge_verify_*`` families a worker running the verifier serves
(``framework.metrics.collector``), read from the verifier's ``VerifyStats`` at each scrape, on
an aiohttp server bound to 127.0.0.1 (like a worker's), with the worker's bearer-token rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from framework.metrics.collector import ConvergeCollector
from framework.metrics.endpoint import CONTENT_TYPE, METRICS_PATH, bearer_challenge
from framework.metrics.snapshot import Snapshot, verify_status

__all__ = ["serve_verifier_metrics"]

HOST = "127.0.0.1"


async def serve_verifier_metrics(
    stats: Callable[[], Any], port: int, *, token: str | None = None
) -> tuple[web.AppRunner, int]:
    """Serve the metrics of ``stats()`` (a ``VerifyStats``) on ``HOST:port`` (0: any free port);
    the started runner (``cleanup()`` stops it) and the port bound."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConvergeCollector(lambda: Snapshot(verify=verify_status(stats()))))

    async def handle(request: web.Request) -> web.Response:
        refused = bearer_challenge(request, token)
        if refused is not None:
            return refused
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get(METRICS_PATH, handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, port)
    await site.start()
    return runner, int(runner.addresses[0][1])
