"""``assert_pure``: an agent's ``handle`` is a function of the event alone.

What it checks, per event:

- ``handle`` on an equal copy of the event, and on the event as the worker
  hands it over (JSON-encoded and parsed; skipped for an event that does not
  encode), gives equal mutations (or raises the same error class and text);
- the event's payload is unchanged afterwards (deep comparison);
- for an agent with lookups (``handle(event, state)``): each call gets a
  fresh read-only view of the entries given as ``state``, and every call
  reads the same keys (a read that misses counts: ``Missing`` is an outcome
  like any error);
- while ``handle`` runs, calling any of these raises AssertionError naming
  it (and is reported even when ``handle`` catches the error): the clock
  (``time.time``/``time_ns``/``monotonic``/``perf_counter``/``sleep``,
  ``datetime.now``/``utcnow``/``today``, ``date.today``), randomness
  (``random``'s module functions, ``os.urandom``, ``uuid.uuid1``/``uuid4``),
  files (``open``, ``io.open``, ``os.open``), sockets (``socket.socket``'s
  ``connect``/``connect_ex``/``sendto``, ``socket.create_connection``,
  ``getaddrinfo``) and processes (``subprocess.Popen``, ``os.system``).

How: those names are patched process-wide for the duration of each call,
in their home module and wherever a
module of the agent's own top-level package imported them directly (``from
time import time``); logging is disabled meanwhile, since a log record reads
the clock. Only the thread running the check is guarded: other threads
(e.g. a library's background worker) keep calling the real functions. Not
detected: a reference bound elsewhere before the check (e.g.
inside a third-party library), C extensions doing I/O themselves, reads of
mutable global state or the environment that happen to be equal twice.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import datetime
import io
import logging
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from framework.core.errors import ConvergeError
from framework.core.events import Event, parse_event
from framework.core.lookup import Entry
from framework.core.mutations import Mutation
from framework.runtime.agent import KeyedAgent
from framework.state.view import StateView

__all__ = ["assert_pure", "forbid_impurity", "Impurity"]

_FUNCTIONS: tuple[tuple[Any, str, str], ...] = (
    (time, "time", "time.time()"),
    (time, "time_ns", "time.time_ns()"),
    (time, "monotonic", "time.monotonic()"),
    (time, "monotonic_ns", "time.monotonic_ns()"),
    (time, "perf_counter", "time.perf_counter()"),
    (time, "perf_counter_ns", "time.perf_counter_ns()"),
    (time, "sleep", "time.sleep()"),
    (os, "urandom", "os.urandom()"),
    (uuid, "uuid1", "uuid.uuid1()"),
    (uuid, "uuid4", "uuid.uuid4()"),
    (builtins, "open", "open()"),
    (io, "open", "io.open()"),
    (os, "open", "os.open()"),
    (os, "system", "os.system()"),
    (subprocess, "Popen", "subprocess.Popen()"),
    (socket, "create_connection", "socket.create_connection()"),
    (socket, "getaddrinfo", "socket.getaddrinfo()"),
    (socket.socket, "connect", "socket.connect()"),
    (socket.socket, "connect_ex", "socket.connect_ex()"),
    (socket.socket, "sendto", "socket.sendto()"),
) + tuple(
    (random, name, f"random.{name}()")
    for name in ("random", "randint", "randrange", "choice", "choices", "shuffle", "sample",
                 "uniform", "getrandbits", "gauss", "randbytes")
)  # fmt: skip


class Impurity(ConvergeError, AssertionError):
    """``handle`` called something that makes it impure; ``call`` names it."""

    def __init__(self, call: str) -> None:
        super().__init__(f"handle called {call}: a mapping must not read the clock, use randomness or do I/O")
        self.call = call


class _Guard:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.thread = threading.get_ident()
        self._undo: list[Callable[[], None]] = []

    def watching(self) -> bool:
        """True on the thread that runs the check."""
        return threading.get_ident() == self.thread

    def refuse(self, label: str) -> Any:
        self.calls.append(label)
        raise Impurity(label)

    def forbidden(self, label: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: object, **kwargs: object) -> Any:
            if self.watching():
                return self.refuse(label)
            return original(*args, **kwargs)

        return call

    def patch(self, owner: Any, name: str, new: Any) -> None:
        if name in vars(owner):
            old = vars(owner)[name]
            self._undo.append(lambda: setattr(owner, name, old))
        else:  # inherited (e.g. from _socket.socket): remove the shadow afterwards
            self._undo.append(lambda: delattr(owner, name))
        setattr(owner, name, new)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def _guarded_datetimes(guard: _Guard) -> tuple[type, type]:
    class GuardedDate(datetime.date):
        @classmethod
        def today(cls) -> Any:
            return guard.refuse("date.today()") if guard.watching() else super().today()

    class GuardedDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return guard.refuse("datetime.now()") if guard.watching() else super().now(tz)

        @classmethod
        def utcnow(cls) -> Any:
            return guard.refuse("datetime.utcnow()") if guard.watching() else super().utcnow()

        @classmethod
        def today(cls) -> Any:
            return guard.refuse("datetime.today()") if guard.watching() else super().today()

    return GuardedDate, GuardedDateTime


@contextlib.contextmanager
def forbid_impurity(package: str | None = None) -> Iterator[list[str]]:
    """Within the block, the clock, randomness and I/O calls listed in the module docstring raise
    ``Impurity``; yields the list of forbidden calls made. ``package``: also patch direct imports
    of them in the modules of this top-level package."""
    guard = _Guard()
    date_cls, datetime_cls = _guarded_datetimes(guard)
    by_original: dict[int, Any] = {id(datetime.date): date_cls, id(datetime.datetime): datetime_cls}
    for owner, name, label in _FUNCTIONS:
        original = getattr(owner, name)
        by_original[id(original)] = replacement = guard.forbidden(label, original)
        guard.patch(owner, name, replacement)
    guard.patch(datetime, "date", date_cls)
    guard.patch(datetime, "datetime", datetime_cls)
    for mod_name, module in list(sys.modules.items()):
        if not package or module is None or not (mod_name == package or mod_name.startswith(package + ".")):
            continue
        for attr, value in list(vars(module).items()):
            if id(value) in by_original:
                guard.patch(module, attr, by_original[id(value)])
    disabled = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield guard.calls
    finally:
        logging.disable(disabled)
        guard.undo()


Outcome = tuple[str, Any]
#: the entries of each lookup an agent reads: ``{lookup: {key: entry}}``
Entries = dict[str, dict[str, Entry]]


def _entries(agent: KeyedAgent, state: Mapping[str, Mapping[str, Any]] | None) -> Entries | None:
    """``state`` as entries (a bare value is an entry at version 1); None for an agent without
    lookups."""
    names = {lookup.name for lookup in getattr(agent, "lookups", ())}
    if not names:
        if state:
            raise ValueError(f"{type(agent).__name__} declares no lookups: state= has nothing to feed")
        return None
    unknown = set(state or {}) - names
    if unknown:
        raise ValueError(f"state= names lookups {sorted(unknown)} that {type(agent).__name__} does not "
                         f"declare ({sorted(names)})")  # fmt: skip
    return {
        name: {k: v if isinstance(v, Entry) else Entry(v, 1) for k, v in (state or {}).get(name, {}).items()}
        for name in names
    }


def _outcome(agent: KeyedAgent, event: Event, entries: Entries | None) -> tuple[Outcome, Any]:
    """What ``handle`` returned or raised, and the keys it read (None without lookups)."""
    view = None
    if entries is not None:
        view = StateView(lambda lookup, key: entries[lookup].get(key), frozenset(entries))
    try:
        result = agent.handle(event) if view is None else agent.handle(event, view)  # type: ignore[call-arg]
        outcome: Outcome = ("mutations", list(result))
    except Impurity:
        raise
    except Exception as exc:  # noqa: BLE001 - a bad event may raise; it must raise the same way twice
        outcome = ("raised", f"{type(exc).__name__}: {exc}")
    return outcome, None if view is None else dict(view.reads)


def assert_pure(
    agent: KeyedAgent,
    events: Iterable[Event],
    *,
    round_trip: bool = True,
    state: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[list[Mutation]]:
    """Assert that ``agent.handle`` is pure on each of ``events`` (see the module docstring for
    what is checked and what is not); return each event's mutations (empty when it raised).

    ``state``: for an agent with lookups, the entries its view holds, ``{lookup: {key: entry}}``
    (an ``Entry``, or a bare value at version 1); a lookup left out is empty. The mutations
    returned are ``handle``'s own (the runtime writes them at the version rule's version)."""
    entries = _entries(agent, state)
    package = type(agent).__module__.partition(".")[0]
    out: list[list[Mutation]] = []
    for event in events:
        before = copy.deepcopy(event.to_dict())
        twin = Event(**copy.deepcopy(before))
        decoded = None
        if round_trip:
            with contextlib.suppress(TypeError, ValueError):
                decoded = parse_event(event.to_json())
        where = f"{type(agent).__name__}.handle on event {event.event_id!r} ({event.type})"
        with forbid_impurity(package) as calls:
            try:
                first, reads = _outcome(agent, event, entries)
                again, reads_again = _outcome(agent, twin, entries)
                wire, reads_wire = (again, reads_again)
                if decoded is not None:
                    wire, reads_wire = _outcome(agent, decoded, entries)
            except Impurity as exc:
                raise AssertionError(f"{where} is not pure: {exc}") from None
        if calls:
            raise AssertionError(f"{where} is not pure: it called {calls[0]} (and caught the error)")
        if event.to_dict() != before:
            raise AssertionError(
                f"{where} changed the event's payload: {before['payload']!r} -> {dict(event.payload)!r}"
            )
        if again != first:
            raise AssertionError(
                f"{where} is not deterministic: {first[1]!r} then, for an equal event, {again[1]!r}"
            )
        if wire != first:
            raise AssertionError(
                f"{where} differs for the event as the worker delivers it (JSON-decoded): "
                f"{first[1]!r} vs {wire[1]!r}"
            )
        if not reads == reads_again == reads_wire:
            raise AssertionError(
                f"{where} read different lookup entries for equal events: {sorted(reads or {})} then "
                f"{sorted(reads_again or {})}, then {sorted(reads_wire or {})} (JSON-decoded)"
            )
        out.append(first[1] if first[0] == "mutations" else [])
    return out
