"""The HTTP ack endpoint over real loopback TCP: auth, validation, all-or-nothing writes, binding."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from framework.delivery.ack_http import AckServer
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
