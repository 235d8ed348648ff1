"""Publish a generated support-desk history to the broker, scrambled as a real pipeline would.

``python -m examples.support_desk.publish --tickets 50 [--wait 120]``: the
broker and app id come from the same settings as the worker's
(``CONVERGE_BROKER``, ``CONVERGE_APP_ID``); ``--wait`` then waits until the
app's consumer group has consumed every topic, and exits 1 if it has not.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework import Settings
from framework.kafka_admin import ensure_topics, produce, wait_drained


async def publish(tickets: int, seed: int, wait: float) -> bool:
    settings = Settings.resolve(app.name)
    history = generate_history(seed, tickets)
    await ensure_topics(settings.broker, {t: settings.partitions for t in app.topics()})
    arrival = deliver(history.events, seed)
    for topic, events in by_topic(arrival).items():
        await produce(settings.broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in events])
    print(f"published {len(arrival)} events of {tickets} tickets")
    if not wait:
        return True
    for topic in app.topics():
        if not await wait_drained(settings.broker, settings.app_id, topic, wait):
            print(f"{topic}: not consumed within {wait:.0f} s", file=sys.stderr)
            return False
    print("consumed")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.support_desk.publish", description=__doc__)
    parser.add_argument("--tickets", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wait", type=float, default=0, help="seconds to wait for the app to consume it")
    args = parser.parse_args(argv)
    return 0 if asyncio.run(publish(args.tickets, args.seed, args.wait)) else 1


if __name__ == "__main__":
    sys.exit(main())
