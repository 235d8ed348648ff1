"""The ``/query`` routes of a worker's web server: the reads of ``query.py`` as JSON over HTTP.

``GET /query/total?aggregate=A&group.NAME=VALUE...[&window=T]``, ``GET
/query/windows?aggregate=A&group.NAME=VALUE...[&since=T][&until=T]``, ``GET
/query/top?aggregate=A&by=MEASURE[&limit=N][&window=T]`` and ``GET
/query/entity?table=T&key.NAME=VALUE...[&precedence.TABLE=S1,S2,...]``. ``group.NAME:=JSON`` gives
a group value that is not a string; a time ``T`` is epoch seconds, ISO-8601 (UTC unless it has
an offset), ``now`` or a duration ago (``since=30d%20ago``). The answer is the ``to_dict`` of the
read's dataclass, the same as ``converge query --json``. Bad input (an unknown parameter too) is
a 400 with ``{"error": ...}``; a store not open yet a 503; a failing read a 500: the worker goes
on. Mounted by ``build_worker`` beside ``/metrics`` when its web server is on, so it binds where
that server does (127.0.0.1).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from framework.aggregates.query import Queries, QueryError, parse_group, parse_key, parse_precedence
from framework.core.durations import parse_time
from framework.core.projection import Projection
from framework.delivery.ack_http import guard_bind, is_loopback
from stores.base import WideColumnStore

__all__ = ["QUERY_PREFIX", "QueryRoutes", "mount_queries", "parse_when"]

log = logging.getLogger(__name__)

QUERY_PREFIX = "/query"
_ALLOWED = {
    "total": ({"aggregate", "window"}, ("group.",)),
    "windows": ({"aggregate", "since", "until"}, ("group.",)),
    "top": ({"aggregate", "by", "limit", "window"}, ()),
    "entity": ({"table"}, ("key.", "precedence.")),
}


def parse_when(text: str, name: str) -> float:
    """Epoch seconds of the time ``text`` (``durations.parse_time``: ISO-8601, epoch seconds,
    ``now`` or e.g. ``7d ago``); QueryError naming the parameter ``name`` otherwise."""
    try:
        return parse_time(text)
    except ValueError as exc:
        raise QueryError(f"{name}: {exc}") from None


class QueryRoutes:
    """The request handlers over the store ``store()`` gives (the worker's, once open)."""

    def __init__(
        self,
        store: Callable[[], WideColumnStore],
        views: Sequence[Projection],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.views, self.clock = store, tuple(views), clock

    def install(self, router: web.UrlDispatcher, prefix: str = QUERY_PREFIX) -> None:
        """Add ``GET prefix/<read>`` for each of the four reads."""
        for name in _ALLOWED:
            router.add_get(f"{prefix}/{name}", self._handler(name))

    def _handler(self, name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            return await self.answer(name, request)

        return handle

    async def answer(self, name: str, request: web.Request) -> web.Response:
        """The JSON answer of read ``name`` to ``request``'s parameters."""
        try:
            store = self.store()
        except RuntimeError as exc:  # the worker has not opened its store yet
            return web.json_response({"error": str(exc)}, status=503)
        try:
            answer = await self._read(name, Queries(store, self.views, clock=self.clock), request)
        except QueryError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except Exception as exc:  # noqa: BLE001 - a failed read answers 500; the worker goes on
            log.warning("query %s failed: %r", name, exc)
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=500)
        return web.json_response(answer.to_dict())

    async def _read(self, name: str, q: Queries, request: web.Request) -> Any:
        params = request.query
        names, prefixes = _ALLOWED[name]
        for p in params:
            if p not in names and not p.startswith(prefixes):
                raise QueryError(f"unknown parameter {p!r} of {QUERY_PREFIX}/{name}")
        if len(set(params)) != len(params):
            raise QueryError("a parameter is given twice")

        def one(key: str, required: bool = False) -> str | None:
            if required and key not in params:
                raise QueryError(f"missing parameter {key!r}")
            return params.get(key)

        def when(key: str) -> float | None:
            text = one(key)
            return None if text is None else parse_when(text, key)

        def prefixed(prefix: str) -> list[tuple[str, str]]:
            return [(k[len(prefix) :], v) for k, v in params.items() if k.startswith(prefix)]

        if name == "entity":
            schema = q.source_table(str(one("table", True)))
            key = parse_key(schema, prefixed("key."))
            return await q.entity(schema.name, key, parse_precedence(prefixed("precedence.")))
        aggregate = str(one("aggregate", True))
        if name == "top":
            limit = one("limit") or "10"
            if not limit.isdigit():
                raise QueryError(f"limit: not a number: {limit!r}")
            return await q.top(aggregate, str(one("by", True)), int(limit), when("window"))
        group = parse_group(prefixed("group."))
        if name == "total":
            return await q.total(aggregate, group, when("window"))
        return await q.windows(aggregate, group, when("since"), when("until"))


def mount_queries(worker: Any, views: Sequence[Projection], *, prefix: str = QUERY_PREFIX) -> QueryRoutes:
    """Serve the ``/query`` routes on the web server of ``worker`` (built by ``build_worker``, not
    started) over its store; ValueError when that server binds beyond loopback, here or, should
    ``web_bind`` change afterwards, when the server starts (it then does not start)."""
    bind = str(worker.conf.web_bind)
    if not is_loopback(bind):
        raise ValueError(f"serving queries on {bind!r} is refused: bind the worker's web server to loopback")
    routes = QueryRoutes(lambda: worker.converge.resources.store, views)
    routes.install(worker.web.web_app.router, prefix)
    guard_bind(worker.web.web_app, worker.conf, None, "queries")
    return routes
