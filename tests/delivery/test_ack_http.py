"""The HTTP ack endpoint over real loopback TCP: auth, validation, all-or-nothing writes, binding."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from framework.delivery.ack_http import ACK_PATH, AckEndpoint, AckServer
from framework.delivery.acks import MAX_BODY_BYTES
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import DeliveryError
from tests.delivery.conftest import snapshot

TOKEN = "s3cret-token-0123456789"


@pytest.fixture()
async def server(ledger: DeliveryLedger) -> AsyncIterator[AckServer]:
    srv = AckServer(ledger, token=TOKEN)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as resp:
        return resp.status, await resp.json(content_type=None)


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()


AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
M1_SEARCH = {"message_id": "m1", "consumer": "search"}
GOOD = _json(
    {"acks": [{"message_id": "m1", "consumer": "search"}, {"message_id": "m2", "consumer": "timeline"}]}
)


async def test_binds_loopback_by_default(server: AckServer) -> None:
    assert server.host == "127.0.0.1" and server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}/delivery/acks"


async def test_valid_batch_is_written_in_full(server: AckServer, ledger: DeliveryLedger) -> None:
    r1 = await ledger.register("m1", "exchange")
    r2 = await ledger.register("m2", "google")
    assert await _post(server.url, GOOD, AUTH) == (200, {"acked": 2})
    assert (await ledger.read(r1)).acked == {"search"}  # type: ignore[union-attr]
    assert (await ledger.read(r2)).acked == {"timeline"}  # type: ignore[union-attr]
    assert await _post(server.url, GOOD, AUTH) == (200, {"acked": 2})


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/json"},
        {"Authorization": "Bearer wrong-token-0123456789", "Content-Type": "application/json"},
        {"Authorization": f"Basic {TOKEN}", "Content-Type": "application/json"},
        {"Authorization": f"Bearer {TOKEN}x", "Content-Type": "application/json"},
        {"Authorization": "Bearer", "Content-Type": "application/json"},
    ],
)
async def test_missing_or_wrong_token_is_401_and_writes_nothing(
    server: AckServer, ledger: DeliveryLedger, headers: dict[str, str]
) -> None:
    await ledger.register("m1", "exchange")
    await ledger.register("m2", "google")
    before = await snapshot(ledger)
    async with aiohttp.ClientSession() as http, http.post(server.url, data=GOOD, headers=headers) as resp:
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert await snapshot(ledger) == before


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"{not json", 400),
        (b"", 400),
        (_json([1, 2]), 400),
        (_json({"acks": []}), 400),
        (_json({"acks": [{"message_id": "m1", "consumer": "search"}, {"message_id": "m2"}]}), 400),
        (_json({"acks": [M1_SEARCH, {"message_id": "m2", "consumer": "billing"}]}), 400),
        (_json({"acks": [M1_SEARCH, {"message_id": "m9", "consumer": "search"}]}), 422),
        (b"x" * ((1 << 20) + 10), 413),
    ],
)  # fmt: skip
async def test_malformed_or_partly_bad_bodies_are_4xx_and_never_a_partial_ack(
    server: AckServer, ledger: DeliveryLedger, body: bytes, status: int
) -> None:
    await ledger.register("m1", "exchange")
    await ledger.register("m2", "google")
    before = await snapshot(ledger)
    got, answer = await _post(server.url, body, AUTH)
    assert got == status and "error" in answer
    if status == 422:
        assert answer["unknown"] == ["m9"]
    assert await snapshot(ledger) == before


async def test_non_json_content_type_is_415(server: AckServer, ledger: DeliveryLedger) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"}
    assert (await _post(server.url, GOOD, headers))[0] == 415


async def test_other_methods_are_refused(server: AckServer) -> None:
    async with aiohttp.ClientSession() as http, http.get(server.url, headers=AUTH) as resp:
        assert resp.status == 405


async def test_without_a_token_loopback_serves_and_exposure_is_refused(ledger: DeliveryLedger) -> None:
    await ledger.register("m1", "exchange")
    open_srv = AckServer(ledger)
    await open_srv.start()
    try:
        body = _json({"acks": [{"message_id": "m1", "consumer": "search"}]})
        assert await _post(open_srv.url, body, {"Content-Type": "application/json"}) == (200, {"acked": 1})
    finally:
        await open_srv.stop()
    with pytest.raises(DeliveryError, match="requires a bearer token"):
        AckServer(ledger, host="0.0.0.0")
    with pytest.raises(DeliveryError, match="at least 16"):
        AckServer(ledger, token="short")


DEEP = b'{"acks": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
BIG_INT = b'{"acks": [{"message_id": ' + b"9" * 5000 + b', "consumer": "search"}]}'
LONE_SURROGATE = b'{"acks": [{"message_id": "m\\ud800", "consumer": "search"}]}'


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (DEEP, "body", "nested too deeply"),
        (BIG_INT, "body", "longer than"),
        (LONE_SURROGATE, "acks[0].message_id", "lone surrogate"),
    ],
)
async def test_bodies_python_cannot_hold_are_400_not_500(
    server: AckServer, ledger: DeliveryLedger, body: bytes, field: str, says: str
) -> None:
    await ledger.register("m1", "exchange")
    before = await snapshot(ledger)
    status, answer = await _post(server.url, body, AUTH)
    assert status == 400
    assert answer["field"] == field and says in answer["error"]
    assert await snapshot(ledger) == before
    assert await _post(server.url, _json({"acks": [M1_SEARCH]}), AUTH) == (200, {"acked": 1})


async def _post_chunked(url: str, chunks: list[bytes], headers: dict[str, str]) -> tuple[int, dict]:
    """POST ``chunks`` with ``Transfer-Encoding: chunked``, the first one sent on its own."""

    async def body() -> AsyncIterator[bytes]:
        yield chunks[0]
        await asyncio.sleep(0.05)  # so the first chunk reaches the handler before the rest
        for chunk in chunks[1:]:
            yield chunk

    async with aiohttp.ClientSession() as http, http.post(url, data=body(), headers=headers) as resp:
        assert resp.request_info.headers.get("Transfer-Encoding") == "chunked"
        return resp.status, await resp.json(content_type=None)


async def test_a_chunked_body_is_read_whole_and_the_limit_holds_on_all_of_it(
    server: AckServer, ledger: DeliveryLedger
) -> None:
    await ledger.register("m1", "exchange")
    await ledger.register("m2", "google")
    before = await snapshot(ledger)
    first = _json({"acks": [M1_SEARCH]})
    garbage = [b"x" * 65_536] * 25  # 1.6 MB after a valid first chunk
    status, answer = await _post_chunked(server.url, [first, *garbage], AUTH)
    assert status == 413 and "larger than" in answer["error"]
    status, answer = await _post_chunked(server.url, [first, b"garbage"], AUTH)
    assert status == 400 and answer["field"] == "body"
    assert await snapshot(ledger) == before
    # A valid body split across chunks is read whole: both acks are written.
    assert await _post_chunked(server.url, [GOOD[:20], GOOD[20:40], GOOD[40:]], AUTH) == (200, {"acked": 2})
    assert await snapshot(ledger) != before


@pytest.mark.parametrize(
    "token",
    [
        " " * 16,
        "\0" * 16,
        "\t" * 20,
        " " * 8 + "abcdefgh",
        "secret token with spaces",
        "tökentökentöken!",
        "a\nbcdefghijklmnop",
    ],
)
def test_tokens_that_cannot_travel_in_a_bearer_header_are_refused_at_startup(
    ledger: DeliveryLedger, token: str
) -> None:
    with pytest.raises(DeliveryError, match="visible ASCII"):
        AckServer(ledger, token=token)
    with pytest.raises(DeliveryError, match="visible ASCII"):
        AckServer(ledger, host="0.0.0.0", token=token)


async def _raw_post(port: int, head: bytes, body: bytes) -> int:
    """The status of a request written byte for byte (headers aiohttp's client would not send)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        status_line = await reader.readline()
        return int(status_line.split()[1])
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize(
    ("auth", "status"),
    [
        (b"Bearer \xff\xfe-not-utf8", 401),
        (b"Bearer    ", 401),
        (b"Bearer\t", 401),
        (b"Bearer \x00\x00", 400),  # aiohttp's parser refuses a NUL in a header before the handler
    ],
)
async def test_undecodable_empty_or_blank_tokens_are_refused_not_500(
    server: AckServer, ledger: DeliveryLedger, auth: bytes, status: int
) -> None:
    await ledger.register("m1", "exchange")
    before = await snapshot(ledger)
    head = (
        b"POST /delivery/acks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: " + auth + b"\r\n"
    )
    assert await _raw_post(server.port, head, GOOD) == status
    assert await snapshot(ledger) == before


async def test_the_limit_holds_on_a_host_app_that_allows_larger_bodies(ledger: DeliveryLedger) -> None:
    """Mounted on another server (as on a Faust worker's), the endpoint keeps its own body limit."""
    await ledger.register("m1", "exchange")
    host = web.Application(client_max_size=8 * MAX_BODY_BYTES)
    AckEndpoint(ledger, token=TOKEN).install(host.router)
    runner = web.AppRunner(host, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        url = f"http://127.0.0.1:{port}{ACK_PATH}"
        first = _json({"acks": [M1_SEARCH]})
        status, _ = await _post_chunked(url, [first, b" " * MAX_BODY_BYTES], AUTH)
        assert status == 413
        assert await _post_chunked(url, [first, b" " * 1000], AUTH) == (200, {"acked": 1})
    finally:
        await runner.cleanup()


async def test_the_limit_counts_the_decompressed_body(server: AckServer, ledger: DeliveryLedger) -> None:
    await ledger.register("m1", "exchange")
    before = await snapshot(ledger)
    small = gzip.compress(_json({"acks": [M1_SEARCH]}) + b" " * (2 * MAX_BODY_BYTES))  # ~2 KB on the wire
    assert len(small) < 10_000
    status, answer = await _post(server.url, small, {**AUTH, "Content-Encoding": "gzip"})
    assert status == 413 and "larger than" in answer["error"]
    assert await snapshot(ledger) == before
