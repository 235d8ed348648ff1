"""``GET /metrics`` on a worker's web server: mounted by ``build_worker`` when the web port is set,
served in the Prometheus text format, refused beyond loopback without a token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from framework.metrics import mount_metrics
from framework.settings import Settings
from framework.worker.wiring import build_worker
from tests.app.toy import toy_app


def _worker(tmp_path: Path, web_port: int | None):  # type: ignore[no-untyped-def]
    settings = Settings.resolve("toy", data_dir=tmp_path / "w", broker="kafka://127.0.0.1:1",
                                es_url="http://127.0.0.1:1", web_port=web_port)  # fmt: skip
    return build_worker(toy_app(), settings)


async def _get(worker, *headers: dict[str, str]) -> list[tuple[int, str, str]]:  # type: ignore[no-untyped-def]
    """GET /metrics once per header set (one event loop: an aiohttp app is served from one)."""
    out = []
    async with TestClient(TestServer(worker.web.web_app)) as client:
        for h in headers or ({},):
            response = await client.get("/metrics", headers=h)
            out.append((response.status, response.headers["Content-Type"], await response.text()))
    return out


def test_a_worker_with_a_web_port_serves_its_metrics(tmp_path: Path) -> None:
    worker = _worker(tmp_path, 16066)
    assert worker.conf.web_bind == "127.0.0.1"
    [(status, content_type, body)] = asyncio.run(_get(worker))
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(body) for s in f.samples}  # fmt: skip
    for runtime in ("notes", "project.notes"):  # not started: every counter is there, at 0
        assert samples[("converge_received_total", (("runtime", runtime),))] == 0
        assert samples[("converge_batch_size_count", (("runtime", runtime),))] == 0
    assert "# TYPE converge_sink_latency_seconds histogram" in body
    assert "# TYPE converge_parked_events gauge" in body


def test_a_worker_without_a_web_port_serves_nothing(tmp_path: Path) -> None:
    worker = _worker(tmp_path, None)
    assert worker.conf.web_enabled is False
    assert all(r.resource.canonical != "/metrics" for r in worker.web.web_app.router.routes())


def test_beyond_loopback_the_endpoint_needs_a_token(tmp_path: Path) -> None:
    worker = _worker(tmp_path, None)
    worker.conf.web_bind = "0.0.0.0"  # noqa: S104 - what the check refuses
    with pytest.raises(ValueError, match="requires a bearer token"):
        mount_metrics(worker)
    token = "s3cret-metrics-token"
    mount_metrics(worker, token=token)
    wrong = {"Authorization": "Bearer wrong-token-of-some-length"}
    none, wrong, right = asyncio.run(_get(worker, {}, wrong, {"Authorization": f"Bearer {token}"}))
    assert none[0] == wrong[0] == 401
    assert right[0] == 200 and "converge_received_total" in right[2]
