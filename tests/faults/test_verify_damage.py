"""Damage nobody announced, during a stream with a worker killed and an index outage: the
worker's change verifier (``CONVERGE_VERIFY``) and its sweeps (``CONVERGE_VERIFY_SWEEP``) find
and repair every damaged document (index documents deleted, edited and added, a store row
written past the change feed), and repair nothing else. Both example apps: the activity
platform (the reference run, checked against its oracle) and the support desk with
notifications on (its documents against its oracle); the document written past the feed
against the oracle's with that change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.schemas import ACTIVITY_HUB
from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.oracle import expected_state
from examples.support_desk import oracle as desk_oracle
from examples.support_desk.schemas import TICKET
from framework import App
from framework.core.events import Event
from framework.kafka_admin import wait_group_settled
from framework.local_stack import LocalStack, free_port
from framework.metrics.summary import fetch_metrics, summarize_verify
from framework.runtime.mapping import map_event
from framework.testing.compare import compare_documents
from framework.worker.processes import kill_worker, stop_worker
from tests.faults.conftest import FaultPlan
from tests.notifications.live_desk import (
    Documents,
    LiveDesk,
    add_orphan,
    damage_index,
    index_documents,
    last_ingestion,
    write_past_the_feed,
)
from tests.notifications.notified_desk import app as desk_app
from tests.support.fault_figures import FaultFigures
from tests.support.reference_runs import ReferenceRun
from tests.support.stack_faults import start_service, stop_service

pytestmark = pytest.mark.faults

#: Longer than the index outage and the projector's catch-up after it, so that only the damage
#: differs once a change has settled.
SETTLE = 30.0
#: The worker's full sweeps: every this many seconds after the last (kept in the checkpoint store).
SWEEP = 20.0
#: The damage: two documents deleted and one edited in the index, a document added to it that no
#: partition maps to, a row changed in the store past the change feed. The notifications lead
#: the change verifier to the first three; only a sweep finds the other two.
DAMAGE = {"missing": 2, "content": 2, "orphaned": 1}
ORPHAN = "added-by-hand"
BYPASSED = "written past the change feed"
#: Damage to repaired: the settle time, a sweep's wait and its second look, and a margin.
DEADLINE = SETTLE + SWEEP + max(SETTLE, 5.0) + 150


def _documents_of(events: list[Event], of: App = app) -> set[str]:
    """The ids of the documents of ``of``'s first projection ``events`` change (its own mapping)."""
    projection = of.projections[0]
    out: set[str] = set()
    for e in events:
        agent = of.route(e)
        out |= set(projection.touched(map_event(agent, e, of.views_of(agent))))
    return out


def _past_the_feed(store_url: str, table: str, key: str, written: Documents, damaged: list[str]) -> str:
    """Change the subject of a document not otherwise damaged in its source row, past the change
    feed (above every write time the row holds); the document's id."""
    bypassed = next(d for d in sorted(written) if d not in damaged and "subject" in written[d][0])
    version = int(written[bypassed][1] or 0) + 1
    asyncio.run(write_past_the_feed(store_url, table, {key: bypassed}, {"subject": BYPASSED}, version))
    return bypassed


def test_damage_behind_the_frameworks_back_is_repaired_and_nothing_else(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """A third of the history, a SIGKILL of the busy worker (and a broker restart, which clears the
    killed member), the rest of it in small chunks with the index stopped halfway for the outage's
    length. Once the group has drained, three documents only the last chunks changed are damaged
    in the index (two deleted, one edited at its version) before their changes settle. The
    verifier repairs exactly those three; the store and the index then match the oracle."""
    assert fresh_stack.info is not None
    started = time.monotonic()
    history = generate_history(fault_plan.seed + 5, fault_plan.stream_events)
    events = list(history.events)
    run = ReferenceRun(fresh_stack, tmp_path)
    run.env["CONVERGE_VERIFY"] = f"{SETTLE:g}s"
    run.env["CONVERGE_VERIFY_SWEEP"] = f"{SWEEP:g}s"
    figures = FaultFigures("unannounced index damage", events=len(events))
    third = len(events) // 3
    run.produce(events[:third])
    proc = run.start("w")
    run.wait_processed("w", proc, third // 2, 120)
    kill_worker(proc)
    figures.kills += 1
    fresh_stack.restart()
    figures.outages += 1
    proc = run.start("w")
    figures.restarts += 1
    alias = app.projections[0].alias
    try:
        rest, outage = events[third:], None
        for i in range(0, len(rest), 100):
            run.produce(rest[i : i + 100])
            if outage is None and i >= len(rest) // 2:
                stop_service(fresh_stack, "elasticsearch")
                figures.outages += 1
                outage = time.monotonic()
            if outage is not None and time.monotonic() - outage >= fault_plan.index_outage_s:
                start_service(fresh_stack, "elasticsearch")
                outage = -1.0
            time.sleep(0.15)
        if outage is not None and outage >= 0:
            time.sleep(max(0.0, fault_plan.index_outage_s - (time.monotonic() - outage)))
            start_service(fresh_stack, "elasticsearch")
        tail = rest[-300:]
        drained = run.drain(180)
        assert drained, run.log_tail("w")
        written = asyncio.run(index_documents(fresh_stack.info.es_url, alias))
        only_last = sorted(_documents_of(tail) - _documents_of(events[: len(events) - len(tail)]))
        damaged = [d for d in only_last if d in written][:3]
        assert len(damaged) == 3, (len(only_last), len(written))
        asyncio.run(damage_index(fresh_stack.info.es_url, alias, written, damaged, False))
        asyncio.run(add_orphan(fresh_stack.info.es_url, alias, ORPHAN))
        bypassed = _past_the_feed(run.store_url, ACTIVITY_HUB.name, "hub_id", written, damaged)
        last = asyncio.run(last_ingestion(run.store_url))
        deadline, verify = time.monotonic() + DEADLINE, None
        while time.monotonic() < deadline and proc.poll() is None:
            verify = run.verify("w", proc)
            if (
                verify
                and sum(verify["repaired"].values()) >= sum(DAMAGE.values())
                and (verify["last_position"] or 0) >= last  # every entry verified
            ):
                break
            time.sleep(1.0)
        time.sleep(3.0)  # anything repaired beyond the damage would show by now
        verify = run.verify("w", proc)
        alive = proc.poll() is None
    finally:
        code = stop_worker(proc)
    outcome = run.outcome(history, exclude={bypassed})
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    assert alive and code == 0, (alive, code, run.log_tail("w"))
    assert verify is not None, run.log_tail("w")
    found = {c: n for c, n in verify["divergent"].items() if n}
    assert found == DAMAGE, (verify, run.log_tail("w"))
    assert verify["sweeps"] >= 1  # since the restart (the orphan and the row past the feed: found by one)
    # the model of the partition written past the feed: the oracle's document, its subject changed
    model = expected_state(history.truth).documents[bypassed]
    held = asyncio.run(index_documents(fresh_stack.info.es_url, alias))
    assert held[bypassed] == ({**model[0], "subject": BYPASSED}, model[1]) and ORPHAN not in held
    assert {c: n for c, n in verify["repaired"].items() if n} == found  # nothing else repaired
    assert not any(verify["parked"].values())
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert figures.parked == 0, run.parked()[:3]


def test_the_support_desk_verifier_repairs_damage_after_a_kill_and_an_index_outage(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """The support desk with notifications on: half its delivered history, then the worker is
    killed with SIGKILL (the broker restarted, which clears the killed member) and started again;
    the index stops, the rest is produced, the index comes back after the outage's length. Once
    drained, three documents only the second half changed are damaged before their changes
    settle. The verifier repairs exactly those; the index then holds the oracle's documents."""
    started = time.monotonic()
    port = free_port()
    desk = LiveDesk.create(fresh_stack, tmp_path, fault_plan.seed + 7, CONVERGE_VERIFY=f"{SETTLE:g}s",
                           CONVERGE_VERIFY_SWEEP=f"{SWEEP:g}s", CONVERGE_WEB_PORT=str(port))  # fmt: skip
    events = desk.delivered
    figures = FaultFigures("unannounced index damage, support desk", events=len(events))
    half = len(events) // 2
    desk.produce(events[:half])
    proc = desk.start_worker()
    desk.drain()
    kill_worker(proc)
    figures.kills += 1
    fresh_stack.restart()
    figures.outages += 1
    proc = desk.start_worker()
    figures.restarts += 1
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(wait_group_settled(desk.broker, desk.app_id, 1, 120))  # started, its index opened
        stop_service(fresh_stack, "elasticsearch")
        figures.outages += 1
        desk.produce(events[half:])
        time.sleep(fault_plan.index_outage_s)
        start_service(fresh_stack, "elasticsearch")
        desk.drain()
        written = desk.documents()
        only_last = sorted(_documents_of(events[half:], desk_app) - _documents_of(events[:half], desk_app))
        damaged = [d for d in only_last if d in written][:3]
        assert len(damaged) == 3, (len(only_last), len(written))
        desk.damage(written, damaged)
        alias = desk_app.projections[0].alias
        asyncio.run(add_orphan(desk.es_url, alias, ORPHAN))
        bypassed = _past_the_feed(desk.env["CONVERGE_WIDE_STORE"], TICKET.name, "ticket_id", written, damaged)
        last = asyncio.run(last_ingestion(desk.env["CONVERGE_WIDE_STORE"]))
        deadline, summary = time.monotonic() + DEADLINE, None
        while time.monotonic() < deadline and proc.poll() is None:
            summary = summarize_verify(fetch_metrics(url))
            if (
                summary
                and sum(summary.repaired.values()) >= sum(DAMAGE.values())
                and time.time() >= last / 1e6 + SETTLE + 1.0  # the newest entry has settled ...
                and summary.behind_s == 0  # ... and every settled change is verified
            ):
                break
            time.sleep(1.0)
        time.sleep(3.0)  # anything repaired beyond the damage would show by now
        summary = summarize_verify(fetch_metrics(url))
        documents = desk.documents()
        alive = proc.poll() is None
    finally:
        code = stop_worker(proc)
    expected = desk_oracle.expected_state(desk.history.truth).documents
    doc, version = expected[bypassed]  # the model of the ticket written past the feed
    expected[bypassed] = ({**doc, "subject": BYPASSED}, version)
    divergent = compare_documents(expected, documents)
    figures.settle(0, len(divergent), 0, started)
    report(figures)
    assert alive and code == 0, (alive, code, desk.log.read_text()[-3000:])
    assert summary is not None, desk.log.read_text()[-3000:]
    found = {c: n for c, n in summary.divergent.items() if n}
    assert found == DAMAGE, (summary, desk.log.read_text()[-3000:])
    assert summary.sweeps >= 1 and summary.last_sweep_age_s is not None  # since the restart
    assert {c: n for c, n in summary.repaired.items() if n} == found  # nothing else repaired
    assert not any(summary.parked.values())
    assert len(expected) > 5 and not divergent, divergent[:5]
