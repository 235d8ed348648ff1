"""The worker's web routes that need loopback without a token (``/metrics``, ``/query``, the ack
endpoint) check the bind again when the server starts: a ``web_bind`` changed to a public address
after they were mounted stops the server from starting, with a one-line error naming the route."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework.aggregates.http import mount_queries
from framework.delivery.ack_http import mount_on_faust
from framework.metrics import mount_metrics
from framework.settings import Settings
from framework.worker.wiring import build_worker
from tests.app.toy import toy_app

MOUNTS: dict[str, Callable[[Any], object]] = {
    "metrics": mount_metrics,
    "queries": lambda worker: mount_queries(worker, toy_app().views),
    "acks": lambda worker: mount_on_faust(worker, ledger=object()),  # type: ignore[arg-type]
}

#: Faust warns that a key already read is set again: the very change these tests make.
pytestmark = pytest.mark.filterwarnings("ignore::faust.exceptions.AlreadyConfiguredWarning")


def _worker(tmp_path: Path) -> Any:
    settings = Settings.resolve("toy", data_dir=tmp_path / "w", broker="kafka://127.0.0.1:1",
                                es_url="http://127.0.0.1:1")  # fmt: skip
    worker = build_worker(toy_app(), settings)  # no web port: nothing mounted yet
    with socket.socket() as s:  # a free port for when it does start (Faust refuses port 0)
        s.bind(("127.0.0.1", 0))
        worker.conf.web_port = s.getsockname()[1]
    return worker


async def _serve(worker: Any) -> None:
    """Start the worker's web server as Faust does, then stop it."""
    try:
        await worker.web.start_server()
    finally:
        await worker.web.stop_server()


@pytest.mark.parametrize("what", sorted(MOUNTS))
def test_a_bind_changed_after_mounting_is_refused_at_serve_time(tmp_path: Path, what: str) -> None:
    worker = _worker(tmp_path)
    assert str(worker.conf.web_bind) == "127.0.0.1"
    MOUNTS[what](worker)  # accepted: loopback when mounted
    worker.conf.web_bind = "0.0.0.0"  # noqa: S104 - what the check refuses
    with pytest.raises(ValueError) as refused:
        asyncio.run(_serve(worker))
    assert str(refused.value) == (
        f"refusing to serve {what} on '0.0.0.0' without a bearer token:"
        " bind the worker's web server to loopback (127.0.0.1)"
    )


@pytest.mark.parametrize("what", sorted(MOUNTS))
def test_on_loopback_the_server_starts(tmp_path: Path, what: str) -> None:
    worker = _worker(tmp_path)
    MOUNTS[what](worker)
    worker.conf.web_bind = "localhost"
    asyncio.run(_serve(worker))
