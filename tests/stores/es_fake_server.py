"""A tiny scripted HTTP server on 127.0.0.1 that answers like a failing Elasticsearch.

A fake, used only where the real noida-db cannot be made to fail: it returns
chosen statuses (429, 5xx, 4xx), canned bulk item outcomes, or hangs past the
client's timeout, so the adapter's error classification can be checked
through the real elasticsearch client and transport. It records every
request, which also shows that invalid input never reaches the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["Reply", "FakeElasticsearch", "error_body"]

_PRODUCT = {"X-Elastic-Product": "Elasticsearch", "Content-Type": "application/json"}


@dataclass
class Reply:
    """One scripted answer: ``status`` with JSON ``body``, after ``delay`` seconds."""

    status: int = 200
    body: Any = field(default_factory=dict)
    delay: float = 0.0


def error_body(status: int, err_type: str, reason: str = "scripted") -> dict[str, Any]:
    """An Elasticsearch-shaped error body."""
    return {"error": {"type": err_type, "reason": reason, "root_cause": []}, "status": status}


class FakeElasticsearch:
    """``async with FakeElasticsearch(script) as fake:`` serves ``fake.url`` until exit.

    ``script(method, path)`` returns the :class:`Reply` for each request;
    ``requests`` lists the ``(method, path)`` pairs received.
    """

    def __init__(self, script: Callable[[str, str], Reply]) -> None:
        self.script = script
        self.requests: list[tuple[str, str]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path))
        await request.read()
        reply = self.script(request.method, request.path)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return web.Response(status=reply.status, body=json.dumps(reply.body).encode(), headers=_PRODUCT)

    async def __aenter__(self) -> FakeElasticsearch:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
