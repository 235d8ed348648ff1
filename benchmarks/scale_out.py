"""The demo app with 1, 2 and 3 workers side by side, and how long each rebalance took.

    python -m benchmarks.scale_out --events 100000 --runs 5 --workers 1 2 3 --rounds 2
    python -m benchmarks.scale_out --events 3000 --runs 1 --rounds 1 --feed-events 6000  # smoke

First the calibration line: raw aiokafka consume + JSON decode on this machine's noida-db
(``benchmarks.calibration``), to compare figures taken on other machines.

Throughput: one history (generated once), the variants interleaved (1, 2, 3, 1, 2, 3...),
each run on a fresh noida-db and SQLite store with the app's topics of ``--partitions``
partitions (6 by default: 1, 2 and 3 workers hold equal shares). The workers of the platform
app join and the group settles before the clock starts; the clock runs from the first
produced event to the group's commit of every topic's end. CPU seconds (user + system, from
``/proc``) of each process class in that window: the workers, the broker (noida-db) and this
process (the producer, and the drain check polling the group every 0.2 s). Per variant:
medians and ranges of the runs. ``--check`` compares every run's store and index with the
oracle (divergent entities, parked events).

Rebalances: on a fresh stack, one worker, then a feeder produces a second history at
``--rate`` events/s from a thread while the group goes 1 -> 2 -> 3 -> 2 -> 1 workers
``--rounds`` times (the third leaves by SIGINT, the second by SIGKILL: the survivors' group
watch removes the member noida-db keeps). The group's description is read (state, members,
partitions held) every 0.05 s. Per step: seconds from the action (process started, signal
sent) until the group is Stable with every live worker holding partitions, and from the
first reading that saw the rebalance (state not Stable or other members) until then. At the
end the rest of the history is produced, the group drains (or its lagging partitions are
printed after 300 s) and the state is compared with the oracle. Figures in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from agents.event_types import topic_of
from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_seconds
from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.demo import check_convergence
from framework.core.events import Event
from framework.dlq import DeadLetterStore
from framework.kafka_admin import (
    GroupMember,
    GroupReader,
    _described,
    ensure_topics,
    produce,
    wait_all_drained,
    wait_group_settled,
)
from framework.local_stack import LocalStack
from framework.worker.processes import kill_worker, start_worker, stop_workers

SPEC = "examples.activity_platform.app:app"
APP_ID = app.name
CHUNK = 10_000  # records per produce call, as the demo
POLL_S = 0.05  # the rebalance sequence reads the group's description this often
FEED_S = 0.2  # the feeder produces this often
STEP_TIMEOUT_S = 120.0
DRAIN_S = 300.0  # the rebalance sequence's final drain


def _env(work: Path, stack: LocalStack, partitions: int) -> dict[str, str]:
    assert stack.info is not None
    return {"CONVERGE_WIDE_STORE": f"sqlite:///{work / 'wide.db'}", "CONVERGE_ES_URL": stack.info.es_url,
            "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": APP_ID,
            "CONVERGE_PARTITIONS": str(partitions)}  # fmt: skip


def _encoded(events: Sequence[Event]) -> dict[str, list[tuple[bytes, bytes]]]:
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for e in events:
        out.setdefault(topic_of(e.type), []).append((e.ordering_key.encode(), e.to_json()))
    return out


def _outcome(history: History, work: Path, stack: LocalStack, names: Sequence[str]) -> tuple[int, int]:
    """Divergent entities against the oracle and parked events of the workers ``names``."""
    assert stack.info is not None
    store = f"sqlite:///{work / 'wide.db'}"
    divergences = asyncio.run(check_convergence(history, store, stack.info.es_url)).divergences
    for d in divergences[:5]:
        print(f"  divergent: {d}", flush=True)
    parked = sum(1 for n in names for _ in DeadLetterStore(work / n / "dlq").ordered())
    return len({d.key for d in divergences}), parked


@dataclass
class Run:
    """One throughput run of ``workers`` workers."""

    workers: int
    events: int = 0
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # process class -> CPU seconds in the window
    load: float = 0.0
    divergent: int | None = None
    parked: int | None = None

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def throughput_run(
    workers: int, history: History, encoded: dict[str, list[tuple[bytes, bytes]]], partitions: int,
    work: Path, check: bool,
) -> Run:  # fmt: skip
    """Start ``workers`` workers on a fresh stack, let the group settle, produce, wait drained."""
    run = Run(workers, events=len(history.events))
    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        topics = tuple(app.topics())
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, partitions)))
        names = [f"w{i}" for i in range(workers)]
        procs = [start_worker(SPEC, work / n, broker, _env(work, stack, partitions)) for n in names]
        try:
            asyncio.run(wait_group_settled(broker, APP_ID, workers, STEP_TIMEOUT_S))
            pids = {"workers": [p.pid for p in procs], "broker": [stack.info.pid], "producer": [os.getpid()]}
            before = {k: sum(map(cpu_seconds, v)) for k, v in pids.items()}
            load0, t0 = os.getloadavg()[0], time.perf_counter()
            for topic, records in encoded.items():
                for i in range(0, len(records), CHUNK):
                    asyncio.run(produce(broker, topic, records[i : i + CHUNK]))
            if not asyncio.run(wait_all_drained(broker, APP_ID, topics, 900, poll=0.2)):
                raise RuntimeError(f"{workers} worker(s): not drained in 900 s; logs in {work}")
            run.seconds = time.perf_counter() - t0
            run.cpu = {k: sum(map(cpu_seconds, v)) - before[k] for k, v in pids.items()}
            run.load = max(load0, os.getloadavg()[0])
        finally:
            codes = stop_workers(procs)
        if any(codes):
            raise RuntimeError(f"worker exit codes {codes}; logs in {work}")
        if check:
            run.divergent, run.parked = _outcome(history, work, stack, names)
    return run


def _spread(values: Sequence[float], fmt: str) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def summarize(runs: Sequence[Run]) -> list[str]:
    """One line per variant: medians (ranges) of throughput and CPU microseconds per event."""
    lines = ["workers  runs  events/s (range)          wall s            "
             "CPU us/event: workers     broker           producer"]  # fmt: skip
    for w in sorted({r.workers for r in runs}):
        mine = [r for r in runs if r.workers == w]
        per_event = {k: [r.cpu[k] / r.events * 1e6 for r in mine] for k in ("workers", "broker", "producer")}
        lines.append(
            f"{w:7}  {len(mine):4}  {_spread([r.rate for r in mine], ',.0f'):24}  "
            f"{_spread([r.seconds for r in mine], '.1f'):16}  {_spread(per_event['workers'], '.0f'):22}  "
            f"{_spread(per_event['broker'], '.0f'):15}  {_spread(per_event['producer'], '.0f')}"
        )
    return lines


class Feeder:
    """Produces ``events`` in their order, each to its topic, about ``rate`` a second from a thread
    until stopped; ``finish`` produces the rest."""

    def __init__(self, broker: str, events: Sequence[Event], rate: float) -> None:
        self.broker, self.events, self.rate, self.sent = broker, events, rate, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _send(self, upto: int) -> None:
        for topic, records in _encoded(self.events[self.sent : upto]).items():
            asyncio.run(produce(self.broker, topic, records))
        self.sent = upto

    def _loop(self) -> None:
        step = max(1, int(self.rate * FEED_S))
        while self.sent < len(self.events) and not self.done.is_set():
            t0 = time.monotonic()
            self._send(min(len(self.events), self.sent + step))
            time.sleep(max(0.0, FEED_S - (time.monotonic() - t0)))

    def finish(self) -> None:
        self.done.set()
        self.thread.join(60)
        if self.sent < len(self.events):
            self._send(len(self.events))


@dataclass
class Step:
    """One rebalance: what was done, when, and what the group did after."""

    what: str
    members: int
    action_s: float | None = None  # action to settled
    seen_s: float | None = None  # first reading that saw the rebalance to settled
    states: list[str] = field(default_factory=list)
    lag: int = 0  # the group's lag just after it settled


async def _describe(admin: AIOKafkaAdminClient) -> tuple[str, tuple[GroupMember, ...]]:
    (response,) = await admin.describe_consumer_groups([APP_ID])
    state, members = _described(response)
    return state, tuple(members)


async def _watch_step(
    admin: AIOKafkaAdminClient, step: Step, t_action: float, before: frozenset[str]
) -> None:
    """Read the group every ``POLL_S`` until it settles with ``step.members`` members holding partitions."""
    seen: float | None = None
    while time.monotonic() - t_action < STEP_TIMEOUT_S:
        try:
            state, members = await _describe(admin)
        except KafkaError:  # one failed reading (a broker busy in a rebalance): read again
            await asyncio.sleep(POLL_S)
            continue
        now = time.monotonic()
        ids = frozenset(m.member_id for m in members)
        if not step.states or step.states[-1] != f"{state}/{len(ids)}":
            step.states.append(f"{state}/{len(ids)}")
        if seen is None and (state != "Stable" or ids != before):
            seen = now
        if (seen is not None and state == "Stable" and len(ids) == step.members
                and all(any(m.holds.values()) for m in members)):  # fmt: skip
            step.action_s, step.seen_s = now - t_action, now - seen
            return
        await asyncio.sleep(POLL_S)


def rebalance_sequence(
    history: History, partitions: int, work: Path, rounds: int, rate: float, dwell: float
) -> tuple[list[Step], tuple[int, float], int, int]:  # fmt: skip
    """Scale 1 -> 2 -> 3 -> 2 -> 1 ``rounds`` times with data flowing; the steps, the events
    the feeder sent during the sequence and in how many seconds, divergent entities and parked
    events at the end."""
    steps: list[Step] = []
    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        bootstrap = stack.info.kafka_bootstrap
        broker = f"kafka://{bootstrap}"
        topics = tuple(app.topics())
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, partitions)))
        env = _env(work, stack, partitions)
        live: dict[str, subprocess.Popen[bytes]] = {}
        names: list[str] = []
        feeder = Feeder(broker, history.events, rate)

        def act(what: str, action: str, name: str) -> bool:
            async def go() -> Step:
                admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
                await admin.start()
                try:
                    before = frozenset(m.member_id for m in (await _describe(admin))[1])
                    t = time.monotonic()
                    if action == "start":
                        names.append(name)
                        live[name] = start_worker(SPEC, work / name, broker, env)
                    elif action == "sigint":
                        live[name].send_signal(signal.SIGINT)
                    else:
                        kill_worker(live.pop(name))
                    step = Step(what, len(live) - (action == "sigint"))
                    await _watch_step(admin, step, t, before)
                finally:
                    await admin.close()
                reader = GroupReader(broker, APP_ID)
                try:
                    r = await reader.read(topics)
                finally:
                    await reader.close()
                step.lag = sum(max(0, end - r.committed.get(tp, 0)) for tp, end in r.ends.items())
                return step

            step = asyncio.run(go())
            if action == "sigint":
                live.pop(name).wait(60)  # it left the group and stops
            steps.append(step)
            print(_step_line(step), flush=True)
            return step.action_s is not None

        try:
            ok = act("start w1 (1 worker)", "start", "w1")
            fed_from = time.monotonic()
            feeder.thread.start()
            time.sleep(dwell)
            for r in range(rounds):
                second, third = f"w2.{r}", f"w3.{r}"
                plan = ((f"+{second} (2 workers)", "start", second),
                        (f"+{third} (3 workers)", "start", third),
                        (f"-{third} SIGINT (2 workers)", "sigint", third),
                        (f"-{second} SIGKILL (1 worker)", "sigkill", second))  # fmt: skip
                for what, action, name in plan:
                    ok = ok and act(f"round {r + 1}: {what}", action, name)
                    if ok:
                        time.sleep(dwell)
            sent, fed_s = feeder.sent, time.monotonic() - fed_from
            if sent >= len(history.events):
                print("the feeder ran dry before the end: raise --feed-events or lower --rate", flush=True)
            feeder.finish()
            if not asyncio.run(wait_all_drained(broker, APP_ID, topics, DRAIN_S, poll=0.5)):
                lagging = asyncio.run(_lagging(broker, topics))
                print(f"NOT drained {DRAIN_S:.0f} s after the sequence: {lagging}", flush=True)
        finally:
            feeder.finish()
            stop_workers(list(live.values()))
        divergent, parked = _outcome(history, work, stack, names)
    return steps, (sent, fed_s), divergent, parked


async def _lagging(broker: str, topics: Sequence[str]) -> str:
    """The group's state and its partitions with lag (committed/end), from the broker."""
    reader = GroupReader(broker, APP_ID)
    try:
        r = await reader.read(topics)
    finally:
        await reader.close()
    lag = [f"{t}[{p}] {r.committed.get((t, p), 0)}/{end}" for (t, p), end in sorted(r.ends.items())
           if end > r.committed.get((t, p), 0)]  # fmt: skip
    return f"group {r.state} with {len(r.members)} members; lagging: {', '.join(lag)}"


def _step_line(s: Step) -> str:
    if s.action_s is None or s.seen_s is None:
        return f"{s.what:38}  NOT settled in {STEP_TIMEOUT_S:.0f} s  states {' > '.join(s.states)}"
    return (f"{s.what:38}  {s.action_s:6.1f} s from the action  {s.seen_s:6.1f} s from the rebalance seen"
            f"  lag {s.lag:6,}  states {' > '.join(s.states)}")  # fmt: skip


def summarize_steps(steps: Sequence[Step]) -> list[str]:
    """Medians (ranges) of the settle times of the joins, the SIGINT leaves and the SIGKILLs."""
    done = [s for s in steps if s.action_s is not None and s.seen_s is not None]
    lines = [f"settled {len(done)} of {len(steps)} steps"]
    for kind in ("+", "SIGINT", "SIGKILL"):
        mine = [s for s in done if kind in s.what]
        if mine:
            action = _spread([s.action_s for s in mine if s.action_s is not None], ".1f")
            seen = _spread([s.seen_s for s in mine if s.seen_s is not None], ".1f")
            lines.append(
                f"  {kind:7} ({len(mine)}) from the action {action} s, from the rebalance seen {seen} s"
            )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000, help="history size of each throughput run")
    ap.add_argument("--runs", type=int, default=5, help="runs of each variant, interleaved")
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2, 3], help="variants (none: skip)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--check", action="store_true", help="compare each run's state with the oracle")
    ap.add_argument("--rounds", type=int, default=2, help="1-2-3-2-1 rounds (0: none)")
    ap.add_argument("--rate", type=float, default=1_000.0, help="events/s fed during the rebalance sequence")
    ap.add_argument("--dwell", type=float, default=5.0, help="seconds between rebalance steps")
    ap.add_argument("--feed-events", type=int, default=120_000, help="history size of the rebalance sequence")
    ap.add_argument("--calibration-records", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        work = Path(tmp)
        print(calibrate(work / "calibration", args.calibration_records), flush=True)
        print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), f"load {os.getloadavg()}", flush=True)
        runs: list[Run] = []
        if args.workers:
            history = generate_history(7, args.events)
            encoded = _encoded(history.events)
            print(f"throughput: {len(history.events):,} events, {args.partitions} partitions, "
                  f"variants {args.workers} interleaved, {args.runs} run(s) each", flush=True)  # fmt: skip
            for i in range(args.runs):
                for w in args.workers:
                    r = throughput_run(w, history, encoded, args.partitions, work / f"run{i}-{w}", args.check)
                    cpu = "  ".join(f"{k} {v:.1f}" for k, v in r.cpu.items())
                    checked = "" if r.divergent is None else f"  divergent {r.divergent} parked {r.parked}"
                    print(f"  run {i + 1} {w} worker(s): {r.seconds:.1f} s = {r.rate:,.0f} ev/s  CPU s: {cpu}"
                          f"  load {r.load:.2f}{checked}", flush=True)  # fmt: skip
                    runs.append(r)
            print("\n".join(summarize(runs)), flush=True)
        if args.rounds:
            history = generate_history(11, args.feed_events)
            print(f"rebalances: 1-2-3-2-1 x{args.rounds}, {args.partitions} partitions, fed {args.rate:,.0f} "
                  f"events/s, {args.dwell:g} s between steps", flush=True)  # fmt: skip
            steps, (sent, fed_s), divergent, parked = rebalance_sequence(
                history, args.partitions, work / "rebalance", args.rounds, args.rate, args.dwell
            )
            print(f"fed {sent:,} events in the {fed_s:.0f} s of the sequence ({sent / fed_s:,.0f}/s), "
                  f"{len(history.events):,} in all; "
                  f"divergent {divergent}, parked {parked}", flush=True)  # fmt: skip
            print("\n".join(summarize_steps(steps)), flush=True)
        print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), f"load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
