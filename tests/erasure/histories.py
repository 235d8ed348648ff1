"""Random erasure histories of the notes app and the model they are checked against.

A history owns its own addresses, people and notes (``h`` in every key), so
many histories can share one store. Its events write people keyed by an
address in a random spelling (``person.set``) and notes whose cc list holds
addresses in random spellings (``note.set``); some of its addresses are
erased (given in a random spelling too). Every event has its own version.

The model is the mapping applied in version order to the final inputs, by
the notes app's declarations (``tests.erasure.notes_app``), written here
apart from the code under test:

- a person row is keyed by the address as spelled; it is live unless its
  address, lower-cased, is erased; its cells are the latest write's;
- a note that never listed an erased address holds its latest write;
- a note that ever listed one holds no cell of an erased subject: either
  nothing (the erasure tombstoned it for good) or one write that lists none.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from framework.core.events import Event

Cells = dict[str, tuple[Any, int]]


def respell(rng: random.Random, address: str) -> str:
    """``address`` with each letter's case drawn at random."""
    return "".join(c.upper() if c.isalpha() and rng.random() < 0.4 else c for c in address)


@dataclass(frozen=True)
class History:
    """One history: its events (version order), its erased addresses and how each is requested."""

    h: int
    events: tuple[Event, ...]
    erased: frozenset[str]
    requests: tuple[str, ...]

    def spelled(self, text: str) -> set[str]:
        """The addresses (lower-cased) a key or cc text holds."""
        return {part.lower() for part in text.split(";") if part}


def history(rng: random.Random, h: int, *, size: int = 10, most: int = 2) -> History:
    """History ``h``: 1..``size`` events over three addresses and three notes, 1..``most`` erased,
    and a last write of a person who is not."""
    people = [f"p{h}n{i}@x{h}.io" for i in range(3)]
    events = []
    for v in range(1, rng.randint(1, size) + 1):
        if rng.random() < 0.5:
            email = respell(rng, rng.choice(people))
            payload = {"email": email, "name": f"n{v}", "plan": rng.choice(("free", "pro"))}
            events.append(Event(f"e{h}-{v}", email.lower(), v, v, "person.set", payload))
        else:
            note = f"note{h}-{rng.randrange(3)}"
            cc = ";".join(respell(rng, a) for a in rng.sample(people, rng.randint(1, 2)))
            payload = {"note_id": note, "body": f"b{v}", "cc": cc}
            events.append(Event(f"e{h}-{v}", note, v, v, "note.set", payload))
    erased = frozenset(rng.sample(people, rng.randint(1, most)))
    kept = sorted(set(people) - erased)[0]  # one person who stays, so every history has a live row
    email = respell(rng, kept)
    v = len(events) + 1
    payload = {"email": email, "name": f"n{v}", "plan": "free"}
    events.append(Event(f"e{h}-{v}", kept, v, v, "person.set", payload))
    return History(h, tuple(events), erased, tuple(respell(rng, a) for a in sorted(erased)))


def delivery(rng: random.Random, events: Sequence[Event]) -> list[Event]:
    """``events`` shuffled, with duplicates (each event at least once)."""
    sent = list(events) + [rng.choice(events) for _ in range(rng.randint(0, len(events)))] if events else []
    rng.shuffle(sent)
    return sent


def _latest(events: Iterable[Event], cells: Sequence[str]) -> tuple[Cells, int] | None:
    last = max(events, key=lambda e: e.version, default=None)
    if last is None:
        return None
    return {c: (last.payload[c], last.version) for c in cells}, last.version


def model_people(hist: History) -> dict[str, Cells]:
    """Every live person row of the history by its key: ``{email: {column: (value, version)}}``."""
    out: dict[str, Cells] = {}
    keys = {e.payload["email"] for e in hist.events if e.type == "person.set"}
    for k in keys:
        if k.lower() in hist.erased:
            continue
        latest = _latest((e for e in hist.events if e.type == "person.set" and e.payload["email"] == k),
                         ("name", "plan"))  # fmt: skip
        assert latest is not None
        out[k] = latest[0]
    return out


def check_notes(hist: History, live: dict[str, Cells]) -> None:
    """AssertionError unless the live notes of the history follow the model (module docstring)."""
    notes: dict[str, list[Event]] = {}
    for e in hist.events:
        if e.type == "note.set":
            notes.setdefault(e.payload["note_id"], []).append(e)
    assert set(live) <= set(notes), (hist.h, sorted(live))
    for note, events in notes.items():
        mentioned = any(hist.spelled(e.payload["cc"]) & hist.erased for e in events)
        got = live.get(note)
        if not mentioned:
            latest = _latest(events, ("body", "cc"))
            assert latest is not None and got == latest[0], (hist.h, note, got)
            continue
        if got is None:
            continue
        clean = [e for e in events if not hist.spelled(e.payload["cc"]) & hist.erased]
        assert any(got == {"body": (e.payload["body"], e.version), "cc": (e.payload["cc"], e.version)}
                   for e in clean), (hist.h, note, got)  # fmt: skip


def mentions_erased(hist: History, texts: Iterable[str]) -> list[str]:
    """The texts (keys or cells) that hold an erased address in any spelling."""
    return [t for t in texts if any(a in t.lower() for a in hist.erased)]
