"""A worker's host is lost right after it parked events: with ``dlq_durability = uploaded`` every
parked event is in the bucket, listed, replayed and cleaned up from another host's view; and an
object-storage outage while parking makes the events wait, as a sink outage does.

Each example app's worker runs on the embedded stack with the embedded S3 server. Malformed
messages (parked at the parse stage) go to one of its topics; once the worker has committed
every offset of that topic it is killed with SIGKILL and its data directory deleted at once.
`converge dlq` then runs here, with only the object-storage settings: no local WAL exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from framework.cli import main
from framework.dlq.bucket import BucketView
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_s3 import DLQ_BUCKET, LocalS3, dlq_env
from framework.local_stack import StackInfo
from framework.settings import ENV
from framework.worker.loading import load_converge_app
from framework.worker.processes import start_worker
from stores.objects.store import ObjectStore
from tests.dlq.kafka_support import new_topic, read_topic
from tests.support.fault_figures import FaultFigures

pytestmark = pytest.mark.faults

APPS = {
    "support-desk": "examples.support_desk.app:app",
    "activity-platform": "examples.activity_platform.app:app",
}
BAD = 12


@dataclass
class _Run:
    """One example app's worker run: its app id, broker, the topic it parks from, the bad messages."""

    spec: str
    run: str
    app_id: str
    broker: str
    topic: str
    bad: list[tuple[bytes, bytes]]

    @classmethod
    def of(cls, name: str, stack: StackInfo) -> _Run:
        """A fresh run of app ``name``: its topics exist, its messages are not produced yet."""
        spec = APPS[name]
        topics = load_converge_app(spec).topics()
        run = uuid.uuid4().hex[:10]
        broker = f"kafka://{stack.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {t: 4 for t in topics}))
        bad = [
            (f"{run}-{i}".encode(), b'{"event_id": "%s-%d", broken' % (run.encode(), i)) for i in range(BAD)
        ]
        return cls(spec, run, f"{name}-{run}", broker, sorted(topics)[0], bad)

    def start(self, stack: StackInfo, data: Path, endpoint: str, prefix: str) -> subprocess.Popen[bytes]:
        """A worker parking with ``uploaded`` durability to the bucket at ``endpoint``/``prefix``."""
        env = {
            "CONVERGE_WIDE_STORE": f"sqlite:///{(data.parent / 'wide.db').resolve()}",
            "CONVERGE_ES_URL": stack.es_url,
            "CONVERGE_ES_TOMBSTONES": "document",
            "CONVERGE_APP_ID": self.app_id,
            "CONVERGE_PARTITIONS": "4",
            ENV["dlq_durability"]: "uploaded",
            **dlq_env(endpoint, prefix),
        }
        return start_worker(self.spec, data, self.broker, env)

    def drained(self, timeout: float) -> bool:
        """Whether the worker committed every offset of the topic within ``timeout`` seconds."""
        return asyncio.run(wait_drained(self.broker, self.app_id, self.topic, timeout=timeout))


def _kill(worker: subprocess.Popen[bytes]) -> None:
    """The host is lost: SIGKILL, no stop, no seal, no upload."""
    if worker.poll() is None:
        os.kill(worker.pid, signal.SIGKILL)
    worker.wait(30)


@pytest.mark.parametrize("name", sorted(APPS))
def test_parked_events_survive_the_loss_of_their_host(
    name: str,
    stack: StackInfo,
    converge_s3: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    report: Callable[[FaultFigures], None],
) -> None:
    started = time.monotonic()
    r = _Run.of(name, stack)
    prefix = f"host-loss/{r.run}"
    objects = ObjectStore(f"s3://{DLQ_BUCKET}/{prefix}", endpoint=converge_s3, access_key="t", secret_key="t")
    objects.ensure_bucket()
    data = tmp_path / "host-a"
    worker = r.start(stack, data, converge_s3, prefix)
    try:
        asyncio.run(produce(r.broker, r.topic, r.bad))
        drained = r.drained(180)
        log = (data / "worker.log").read_text(errors="replace")[-4000:]
        assert drained, f"{r.topic} not drained by {r.app_id}\n{log}"
    finally:
        _kill(worker)
    shutil.rmtree(data)  # and its disk with it

    for key, value in dlq_env(converge_s3, prefix).items():  # another host: only these settings
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CONVERGE_DATA_DIR", raising=False)
    capsys.readouterr()
    assert main(["dlq", "show", "--json", "--limit", "1000"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    ours = [r for r in shown if r["key"] is not None]
    keys = sorted(_b64(r["key"]) for r in ours)
    lost = BAD - len(set(keys) & {k for k, _ in r.bad})
    figures = FaultFigures(
        f"dlq host loss: {name}", kills=1, events=BAD, parked=len(ours), poison=BAD, lost=lost
    )
    figures.seconds = time.monotonic() - started
    report(figures)
    assert lost == 0, (keys, log)
    assert all(r["stage"] == "parse" for r in ours)

    target = asyncio.run(new_topic(stack.kafka_bootstrap, "host-loss-replay"))
    assert main(["dlq", "replay", "--topic", target, "--broker", stack.kafka_bootstrap]) == 0
    assert f"replayed {len(shown)} records" in capsys.readouterr().out
    replayed = asyncio.run(read_topic(stack.kafka_bootstrap, target))
    assert {v for _, v in r.bad} <= {r.value for r in replayed}
    assert main(["dlq", "cleanup", "--grace", "0s"]) == 0
    assert list(objects.list("segments/")) == [] and list(objects.list("tracker/")) == []
    objects.close()


def _b64(text: str) -> bytes:
    import base64

    return base64.b64decode(text)


@pytest.mark.parametrize("name", sorted(APPS))
def test_an_object_storage_outage_makes_parking_wait_and_loses_nothing(
    name: str,
    stack: StackInfo,
    tmp_path: Path,
    report: Callable[[FaultFigures], None],
) -> None:
    """The object store is down while a worker with ``uploaded`` durability parks: the parked
    events' offsets stay unacknowledged and the worker stays up; once the store is back every
    event is parked in the bucket, and the host can go."""
    started = time.monotonic()
    r = _Run.of(name, stack)
    with LocalS3(tmp_path / "s3") as s3:
        objects = ObjectStore(
            f"s3://{DLQ_BUCKET}/{r.run}", endpoint=s3.endpoint, access_key="t", secret_key="t"
        )
        objects.ensure_bucket()
        data = tmp_path / "host-a"
        worker = r.start(stack, data, s3.endpoint, r.run)
        try:
            assert r.drained(180), "the worker did not start"
            s3.stop()
            asyncio.run(produce(r.broker, r.topic, r.bad))
            waited = not r.drained(15)
            alive = worker.poll() is None
            s3.start()  # the same port; moto lost its objects: the bucket is new
            objects.ensure_bucket()
            drained = r.drained(180)
        finally:
            _kill(worker)
        log = (data / "worker.log").read_text(errors="replace")
        shutil.rmtree(data)
        with BucketView(objects) as view:
            keys = {e.record.key for e in view.store.records()}
        objects.close()
    lost = BAD - len(keys & {k for k, _ in r.bad})
    figures = FaultFigures(
        f"dlq object-storage outage: {name}", kills=1, outages=1, events=BAD, parked=len(keys), poison=BAD
    )
    figures.lost = lost
    figures.seconds = time.monotonic() - started
    report(figures)
    assert waited and alive, ("parking did not wait for the object store", log[-3000:])
    assert "parking waits" in log, log[-3000:]
    assert drained and lost == 0, log[-3000:]
