"""A plain Faust smoke app: counts the events of one topic (env SMOKE_TOPIC)."""

from __future__ import annotations

import os

import faust

from framework.settings import Settings
from framework.worker.faust_app import create_faust_app


def build() -> faust.App:
    settings = Settings.resolve(os.environ.get("SMOKE_APP_ID", "smoke"))
    app = create_faust_app(settings)
    topic = app.topic(os.environ.get("SMOKE_TOPIC", "smoke-in"), key_type=bytes, value_type=bytes,
                      key_serializer="raw", value_serializer="raw")  # fmt: skip
    out = settings.data_dir / "smoke-count.txt"
    seen = {"n": 0}

    @app.agent(topic, name="smoke.count")
    async def count(stream: faust.StreamT) -> None:
        async for _value in stream:
            seen["n"] += 1
            if seen["n"] % 100 == 0:
                out.write_text(f"{seen['n']}\n")

    @app.timer(0.5)
    async def flush() -> None:
        out.write_text(f"{seen['n']}\n")

    return app
