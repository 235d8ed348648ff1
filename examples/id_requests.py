"""ID mutation requests for the example apps' owner ids, and the final id they imply.

``plan_requests(seed, owners)`` takes the owner references of a history (one
``(tenant, owner id, version)`` per event that names an owner) and plans
requests the way a CRM sends them: chains of conversions (a lead becomes a
contact becomes an account member: ``1 -> 2 -> 3``, fresh ids), merges of two
existing ids into a third, and deletes, executed at source times inside the
history, so some events carry an id after its mutation (*late* events, listed
in ``IdPlan.late``). Each id takes part in one operation at most and a moved
id is never named again, which keeps every id to one final id for all
versions (README "ID mutation", the documented limits of the batch side).

``final_id`` is the oracle's side: it follows the requests one move at a time,
without ``framework.idmutation``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from framework.idmutation import IdRequest

__all__ = ["IdPlan", "OwnerRef", "plan_requests", "final_id"]

#: One event's owner reference: (event id, tenant, owner id, version).
OwnerRef = tuple[str, str, str, int]


@dataclass(frozen=True)
class IdPlan:
    """The requests, and the ids of the events that carry an id after its mutation was executed."""

    requests: tuple[IdRequest, ...]
    late: tuple[str, ...]

    def counts(self) -> dict[str, int]:
        """Requests per operation, chains (requests moving an id that was itself a target), late events."""
        targets = {(r.tenant, r.new_id) for r in self.requests}
        out = {op: sum(r.op == op for r in self.requests) for op in ("convert", "merge", "delete")}
        out["chained"] = sum((r.tenant, r.old_id) in targets for r in self.requests)
        out["late"] = len(self.late)
        return out


def plan_requests(
    seed: int, owners: Iterable[OwnerRef], *, share: float = 0.5, chain: float = 0.5, merge: float = 0.25
) -> IdPlan:
    """Requests for about ``share`` of the owner ids of each tenant: a chain of 1-3 conversions
    (``chain``), a merge of two ids into a third (``merge``), else a delete."""
    rng = random.Random(f"id-requests-{seed}")
    versions: dict[tuple[str, str], list[int]] = defaultdict(list)
    refs = list(owners)
    for _, tenant, ident, version in refs:
        versions[(tenant, ident)].append(version)
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for tenant, ident in sorted(versions):
        by_tenant[tenant].append(ident)
    requests: list[IdRequest] = []

    every = [v for _, _, _, v in refs]
    spread = max(1, (max(every) - min(every)) // 10) if every else 1

    def when(ident_versions: Sequence[int]) -> int:
        """Around the id's events: before some of them (those are late) or after them all."""
        lo, hi = min(ident_versions), max(ident_versions)
        return max(0, rng.randint(lo - spread, hi + spread))

    def add(tenant: str, op: str, old: str, new: str | None, at: int) -> None:
        requests.append(IdRequest(at, f"{tenant}-{len(requests)}", tenant, op, old, new))  # type: ignore[arg-type]

    for tenant, ids in sorted(by_tenant.items()):
        free = list(ids)
        rng.shuffle(free)
        chosen = free[: int(len(free) * share)]
        rest = free[int(len(free) * share) :]
        while chosen:
            old = chosen.pop()
            at = when(versions[(tenant, old)])
            roll = rng.random()
            if roll < chain:
                for step in range(rng.randint(1, 3)):
                    new = f"{old}~{step + 1}"
                    add(tenant, "convert", old if step == 0 else f"{old}~{step}", new, at)
                    at += rng.randint(1, 10**6)
            elif roll < chain + merge and chosen and rest:
                other, into = chosen.pop(), rest.pop()
                add(tenant, "merge", old, into, at)
                add(tenant, "merge", other, into, max(at, when(versions[(tenant, other)])))
            else:
                add(tenant, "delete", old, None, at)
    executed = {(r.tenant, r.old_id): r.executed_at for r in requests}
    late = tuple(eid for eid, tenant, ident, v in refs if v > executed.get((tenant, ident), v))
    return IdPlan(tuple(requests), late)


def final_id(requests: Iterable[IdRequest], tenant: str, ident: str) -> str | None:
    """The id ``ident`` ends at under ``requests`` (each id moved once at most); None: deleted."""
    moves = {r.old_id: r.new_id for r in requests if r.tenant == tenant}
    current: str | None = ident
    while current is not None and current in moves:
        current = moves[current]
    return current
