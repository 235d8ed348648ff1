"""Publish a generated support-desk history to the broker, scrambled as a real pipeline would.

``python -m examples.support_desk.publish --tickets 50 [--wait 120] [--id-requests]``: the
broker and app id come from the same settings as the worker's
(``CONVERGE_BROKER``, ``CONVERGE_APP_ID``); ``--wait`` then waits until the
app's consumer group has consumed every topic, and exits 1 if it has not.
``--id-requests`` also publishes the CRM's ID mutation requests for the
history's requester ids (``examples.id_requests``: chains, merges, deletes; some
ticket events are late for them) on ``support.id_requests``, for
``converge idmap run --app examples.support_desk.app:app``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from examples.id_requests import plan_requests
from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver
from examples.support_desk.id_mutation import TOPIC_ID_REQUESTS
from framework import Settings
from framework import publish as publish_events
from framework.kafka_admin import ensure_topics, produce, wait_drained


async def publish(tickets: int, seed: int, wait: float, id_requests: bool = False) -> bool:
    settings = Settings.resolve(app.name)
    history = generate_history(seed, tickets)
    await ensure_topics(settings.broker, {t: settings.partitions for t in app.topics()})
    arrival = deliver(history.events, seed)
    await publish_events(settings.broker, arrival, app)  # each on its type's topic, keyed by entity
    print(f"published {len(arrival)} events of {tickets} tickets")
    if id_requests:
        owners = [(e.event_id, e.payload["tenant"], e.payload["requester_id"], e.version)
                  for e in history.events if e.type == "ticket.created"]  # fmt: skip
        plan = plan_requests(seed, owners)
        await ensure_topics(settings.broker, {TOPIC_ID_REQUESTS: settings.partitions})
        records = [(r.tenant.encode(), json.dumps(r.to_dict()).encode()) for r in plan.requests]
        await produce(settings.broker, TOPIC_ID_REQUESTS, records)
        print(f"published {len(records)} id requests {plan.counts()}")
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
    parser.add_argument("--id-requests", action="store_true", help="also publish ID mutation requests")
    args = parser.parse_args(argv)
    return 0 if asyncio.run(publish(args.tickets, args.seed, args.wait, args.id_requests)) else 1


if __name__ == "__main__":
    sys.exit(main())
