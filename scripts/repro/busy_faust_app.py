"""A plain Faust app (no converge runtime) kept busy: see busy_join.py."""

from __future__ import annotations

import asyncio
import os
import time

import faust

from framework.settings import Settings
from framework.worker.faust_app import create_faust_app


def build() -> faust.App:
    """Four agents: take a noack batch, wait 20 ms, send four records to t4 and await them, ack."""
    settings = Settings.resolve(os.environ["PLAIN_GROUP"])
    app = create_faust_app(settings)
    log = settings.data_dir / "assign.log"
    raw = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    out = app.topic("t4", **raw)
    for name in ("t1", "t2", "t3", "t4"):

        @app.agent(app.topic(name, **raw), name=f"busy.{name}")
        async def consume(stream: faust.StreamT, name: str = name) -> None:
            async for batch in stream.noack().noack_take(500, 0.05):
                await asyncio.sleep(0.02)
                if name != "t4":
                    sent = [await out.send(key=b"x", value=b"y", partition=i % 4) for i in range(4)]
                    await asyncio.gather(*sent)
                for event in batch:
                    event.ack()

    @app.on_partitions_assigned.connect
    async def on_assigned(sender: object, assigned: set[object], **kwargs: object) -> None:
        with open(log, "a") as f:
            f.write(f"{time.time():.1f} assigned {len(assigned)}\n")

    return app
