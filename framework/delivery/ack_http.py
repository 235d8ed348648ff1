"""The HTTP acknowledgement endpoint: ``POST /delivery/acks`` with ``{"acks": [...]}``.

A request is all or nothing: the whole body is validated and every message
resolved before one ledger write records all its acks. Answers: 200
``{"acked": n}``; 400 malformed body or undeclared consumer; 401 missing or
wrong bearer token (when one is configured); 413 body too large; 415 not
JSON; 422 unknown message ids (nothing written); 503 store unavailable.

The whole body is read, chunked or not, and refused with 413 once it passes
``MAX_BODY_BYTES`` after decompression (the limit holds on any web server the
endpoint is mounted on). A body Python's JSON parser cannot hold (nesting too
deep, an integer of too many digits) or whose ids carry a lone surrogate is a
400, like any other malformed body.

Served standalone (``AckServer``, 127.0.0.1 by default) or mounted on a Faust
worker's web server (``mount_on_faust``). Binding beyond loopback requires a
token. A token is at least ``MIN_TOKEN_CHARS`` visible ASCII characters (no
space, control character or NUL): it travels in a header whose surrounding
whitespace is stripped, so any other token could never be presented and is
refused when the endpoint is built; a request whose token is missing, empty
or different gets 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
from typing import Any

import faust
from aiohttp import web

from framework.delivery.acks import MAX_BODY_BYTES, AckFormatError, parse_ack_batch
from framework.delivery.ledger import DeliveryLedger, UnknownMessages
from framework.delivery.model import DeliveryError
from stores.errors import StoreError, TransientStoreError

__all__ = [
    "ACK_PATH", "AckEndpoint", "AckServer", "build_ack_app", "is_loopback", "mount_on_faust", "guard_bind",
]  # fmt: skip

log = logging.getLogger(__name__)

ACK_PATH = "/delivery/acks"
MIN_TOKEN_CHARS = 16
_TOKEN = re.compile(r"[!-~]+")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (IPv4 or IPv6)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_exposure(host: str, token: str | None) -> None:
    if token is not None and (
        not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token)
    ):
        raise DeliveryError(
            "token",
            f"must be a string of at least {MIN_TOKEN_CHARS} characters, "
            "all visible ASCII (no spaces, control characters or NULs)",
        )
    if token is None and not is_loopback(host):
        raise DeliveryError("token", f"binding the ack endpoint to {host!r} requires a bearer token")


def guard_bind(web_app: web.Application, conf: Any, token: str | None, what: str) -> None:
    """Check ``conf.web_bind`` again when the server starts, not only when a route is mounted: a
    Faust worker's web server runs its ``on_startup`` hooks right before it binds, so a bind
    changed to a non-loopback address after mounting is refused then (without ``token``), with a
    one-line ``ValueError`` naming ``what`` is served, and the server does not start."""

    async def check(_app: web.Application) -> None:
        bind = str(conf.web_bind)
        if token is None and conf.web_transport.scheme == "tcp" and not is_loopback(bind):
            raise ValueError(
                f"refusing to serve {what} on {bind!r} without a bearer token:"
                " bind the worker's web server to loopback (127.0.0.1)"
            )

    web_app.on_startup.append(check)


def _error(status: int, message: str, **extra: object) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


class AckEndpoint:
    """The request handler; ``token`` (when set) must come as ``Authorization: Bearer <token>``."""

    def __init__(self, ledger: DeliveryLedger, *, token: str | None = None) -> None:
        _check_exposure("127.0.0.1", token)
        self.ledger = ledger
        self._token = None if token is None else token.encode("utf-8")

    def _authorized(self, request: web.Request) -> bool:
        if self._token is None:
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        given = given.strip()
        # Header values are decoded with surrogateescape: encode them back the same way.
        return bool(given) and hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._token)

    async def handle(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response(
                {"error": "missing or wrong bearer token"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="converge-delivery"'},
            )
        if request.content_type != "application/json":
            return _error(415, "the body must be application/json")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        try:
            # read() takes every chunk and stops past the clone's limit, whatever the app's own limit.
            body = await request.clone(client_max_size=MAX_BODY_BYTES).read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        try:
            acks = parse_ack_batch(body)
            result = await self.ledger.ack_many(acks, strict=True)
        except UnknownMessages as exc:
            return _error(422, "unknown message ids; nothing was acknowledged", unknown=list(exc.message_ids))
        except AckFormatError as exc:
            return _error(400, str(exc), field=exc.field)
        except DeliveryError as exc:
            return _error(400, str(exc), field=exc.field)
        except TransientStoreError as exc:
            log.warning("ack request not written: %s", exc)
            return web.json_response({"error": "store unavailable"}, status=503, headers={"Retry-After": "1"})
        except StoreError as exc:
            log.error("ack request failed: %s", exc)
            return _error(500, "store error")
        return web.json_response({"acked": len(result.acked)})

    def install(self, router: web.UrlDispatcher, path: str = ACK_PATH) -> None:
        """Add the POST route to ``router``."""
        router.add_post(path, self.handle)


def build_ack_app(ledger: DeliveryLedger, *, token: str | None = None) -> web.Application:
    """A standalone aiohttp application serving the endpoint."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    AckEndpoint(ledger, token=token).install(app.router)
    return app


class AckServer:
    """Serves the endpoint on ``host:port`` (port 0: a free one); refuses non-loopback without token."""

    def __init__(
        self, ledger: DeliveryLedger, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None
    ) -> None:
        _check_exposure(host, token)
        self.host, self.port = host, port
        self._app = build_ack_app(ledger, token=token)
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Start listening; returns the bound port."""
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server: Any = site._server  # noqa: SLF001 - the bound port
        sockets = server.sockets if server is not None else []
        self.port = sockets[0].getsockname()[1] if sockets else self.port
        return self.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{ACK_PATH}"

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def mount_on_faust(
    app: faust.App, ledger: DeliveryLedger, *, token: str | None = None, path: str = ACK_PATH
) -> AckEndpoint:
    """Serve the endpoint on the worker's web server (call before the worker starts). Without a
    ``token``, it binds to loopback only, checked here and again when the server starts."""
    _check_exposure(str(app.conf.web_bind), token)
    endpoint = AckEndpoint(ledger, token=token)
    web: Any = app.web  # faust's aiohttp driver exposes its aiohttp Application as ``web_app``
    endpoint.install(web.web_app.router, path)
    guard_bind(web.web_app, app.conf, token, "acks")
    return endpoint
