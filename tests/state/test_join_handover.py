"""A rebalance moves a partition's join state to the other member, and back.

Two members (``join_rig.Member``: each its own data dir with its RocksDB
join book and its own entry table) share the real changelog topic on
noida-db and one store. A partition revoked on one and assigned to the other
is restored there from the changelog (entries read, pending events), its
waiting events are mapped there when their entry arrives and its readers
are mapped again there when an entry changes, while the first member leaves
it alone; moved back, the first member finds its local copy stale and
restores it; a partition that nobody wrote meanwhile is not restored.

Why at the processor level and not two live workers: on noida-db a
two-member rebalance is not reliable within seconds (offset commits during
a rebalance get IllegalGeneration and the group can stall until the 60 s
rebalance timeout; a second member of a busy group may never be assigned,
``scripts/repro/busy_join.py``; the live rebalance of ``tests/faults`` runs
only with ``--faults-long``). ``assign``/``revoke`` do here what the
worker's rebalance callbacks (``AgentRuntime``, ``JoinWiring``) do.
"""

from __future__ import annotations

from pathlib import Path

from framework import Event
from framework.state.changelog import KafkaChangelog
from tests.state.join_app import child, parent_set
from tests.state.join_model import At
from tests.state.join_rig import Member, Offsets, msg_rows, open_store


def _oracle(children: list[Event], entries: dict[str, tuple[str, str, int]]) -> dict:
    out = {}
    for c in children:
        if c.payload["conv"] in entries:
            parent, label, v = entries[c.payload["conv"]]
            cells = {"body": c.payload["body"], "conv": c.payload["conv"], "label": label}
            out[(parent, c.payload["msg_id"])] = At(cells, c.version, 16)  # +1 per entry change
    return out


def _eids(member: Member, p: int) -> set[str]:
    return {k.rsplit("\x1f", 1)[1] for k in member.state(p) if k.startswith("E")}


async def test_a_partition_join_state_moves_to_the_other_member_and_back(
    changelog: KafkaChangelog, tmp_path: Path
) -> None:
    store = await open_store()
    a = Member(tmp_path / "a", store, changelog)
    b = Member(tmp_path / "b", store, changelog)
    off = Offsets()
    try:
        first = [parent_set("c0", "A", "a", 5)]
        await a.feed(first)
        await b.feed(first)
        await a.assign([0, 1])
        # m0..m7: c0 (mapped) and c1 (no entry yet: they wait), on both partitions
        kids = [child(f"m{i}", f"c{i % 2}", "x", 10 + i) for i in range(8)]
        await a.batch([(i % 4 // 2, off(i % 4 // 2), k) for i, k in enumerate(kids)])
        waiting = {k.event_id for k in kids if k.payload["conv"] == "c1"}
        assert {eid for _, eid, *_ in a.book.pending()} == waiting
        before = a.state(1)

        # rebalance: partition 1 moves to b (a fresh data dir)
        a.revoke([1])
        await b.assign([1])
        assert b.state(1) == before and b.processor.restored_records == len(_eids(a, 1))
        assert {eid for p, eid, *_ in b.book.pending()} == {e for e in waiting if e in _eids(b, 1)}
        more = [child(f"m{i}", f"c{i % 2}", "y", 10 + i) for i in range(8, 12)]
        await b.batch([(1, off(1), k) for k in more])
        # the missing entry arrives (every member reads every lookup topic), then c0 changes
        late = [parent_set("c1", "B", "b", 7), parent_set("c0", "C", "c", 60)]
        remapped_a = a.processor.remapped
        for member in (a, b):
            await member.feed(late)
        final = {"c0": ("C", "c", 60), "c1": ("B", "b", 7)}
        assert await msg_rows(store) == _oracle(kids + more, final)
        assert a.processor.status()["pending"] == 0 and b.processor.status()["pending"] == 0
        assert a.processor.remapped - remapped_a == len(_eids(a, 0))  # a left partition 1 alone
        assert b.processor.remapped == len(_eids(b, 1))

        # and back: a's copy of partition 1 is stale (b wrote since), so a restores it
        assert not {k.event_id for k in more} <= _eids(a, 1)
        b.revoke([1])
        restored = a.processor.restored_records
        await a.assign([1])
        assert a.processor.restored_records > restored
        assert a.state(1) == b.state(1)
        await a.feed([parent_set("c1", "D", "d", 80)])
        final["c1"] = ("D", "d", 80)
        assert await msg_rows(store) == _oracle(kids + more, final)

        # a partition nobody wrote meanwhile keeps its local copy
        a.revoke([0])
        restored = a.processor.restored_records
        await a.assign([0])
        assert a.processor.restored_records == restored
    finally:
        await a.close()
        await b.close()
        await store.close()
