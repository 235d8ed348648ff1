"""Collapse a tenant's ID mutation requests into the final id of every (id, version).

The rule (``resolve``), a pure function of the set of requests, so any
arrival order of requests gives the same mapping:

- Per id, its *move-aways* are the requests that name it as ``old_id``,
  ordered by ``(executed_at, request_id)``. A row cell (or an event) under
  id ``X`` at version ``v`` follows the first move-away executed at or after
  ``v``; past the last one it still follows the last one (a *late* event:
  the upstream has not caught up), unless ``X`` was named as a ``new_id``
  after its last move-away and before ``v`` (the id was re-used: ``X`` is
  live again for it). So an id moved twice (``1->2`` at t1, ``1->5`` at t5)
  sends what it held up to t1 to 2 and what came after to 5.
- Following the move-aways from ``X`` at the same ``v`` ends at an id with
  none for ``v`` (the final id), at a delete (the cell is deleted), or in a
  cycle (``1->2`` then ``2->1``): then the final id is the ``new_id`` of the
  cycle's latest request.
- ``convert`` and ``merge`` are the same edge; a merge is several old ids
  with one ``new_id``. Duplicates of a request id count once.

``collapse`` returns, per id that has a move-away, the version intervals
``(after, upto]`` on which its final id is constant (``upto`` None: no upper
bound; ``final`` None: deleted). A chain ``1->2->3->4`` becomes ``1->4``,
``2->4``, ``3->4``, each on ``(-inf, inf)``.

The final id is decided by the cell's version and nothing else, so the rows
a job moved and the events the stream resolves land in the same place, and a
moved cell is never moved again by the same map (a later map routes it again
from its origin: ``framework.idmutation.routes``). Limit: a cell moved into a
re-used id with a version from before the re-use follows that id's old chain.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from framework.idmutation.requests import IdRequest

__all__ = [
    "Interval",
    "TenantGraph",
    "as_mapping",
    "collapse",
    "collapse_component",
    "components",
    "final_of",
    "resolve",
    "unique_requests",
]

#: An interval of versions ``(after, upto]`` and the final id on it (None: deleted).
#: ``after`` None: no lower bound; ``upto`` None: no upper bound.
Interval = tuple[int | None, int | None, str | None]


def _order(r: IdRequest) -> tuple[int, str]:
    return (r.executed_at, r.request_id)


def unique_requests(requests: Iterable[IdRequest]) -> list[IdRequest]:
    """One request per ``(tenant, request_id)``: of conflicting duplicates the smallest, in any order."""
    unique: dict[tuple[str, str], IdRequest] = {}
    for r in requests:
        key = (r.tenant, r.request_id)
        seen = unique.get(key)
        if seen is None or r < seen:
            unique[key] = r
    return list(unique.values())


@dataclass
class TenantGraph:
    """One tenant's requests, indexed for ``resolve``."""

    moves: dict[str, list[IdRequest]]
    move_times: dict[str, list[int]]
    #: per id, the last time it was named as a new_id
    targeted: dict[str, list[int]]

    @classmethod
    def of(cls, requests: Iterable[IdRequest]) -> TenantGraph:
        unique = unique_requests(requests)
        moves: dict[str, list[IdRequest]] = defaultdict(list)
        targeted: dict[str, list[int]] = defaultdict(list)
        for r in sorted(unique, key=_order):
            moves[r.old_id].append(r)
            if r.new_id is not None:
                targeted[r.new_id].append(r.executed_at)
        return cls(
            moves=dict(moves),
            move_times={k: [r.executed_at for r in v] for k, v in moves.items()},
            targeted=dict(targeted),
        )

    def edge(self, ident: str, version: int) -> IdRequest | None:
        """The move-away that a cell of ``ident`` at ``version`` follows, or None (it stays)."""
        moves = self.moves.get(ident)
        if not moves:
            return None
        i = bisect.bisect_left(self.move_times[ident], version)
        if i < len(moves):
            return moves[i]
        last = moves[-1]
        reused = self.targeted.get(ident, ())
        if any(last.executed_at < t < version for t in reused):
            return None
        return last


def resolve(graph: TenantGraph, ident: str, version: int) -> str | None:
    """The final id of a cell of ``ident`` at ``version`` (None: deleted); see the module docstring."""
    path: list[IdRequest] = []
    seen: dict[str, int] = {}
    current = ident
    while True:
        edge = graph.edge(current, version)
        if edge is None:
            return current
        if edge.new_id is None:
            return None
        seen[current] = len(path)
        path.append(edge)
        current = edge.new_id
        if current in seen:
            cycle = path[seen[current] :]
            return max(cycle, key=_order).new_id


def components(requests: Sequence[IdRequest]) -> list[list[IdRequest]]:
    """Requests grouped by connected component of their ids (union-find; the reference)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for r in requests:
        a = find(r.old_id)
        if r.new_id is not None:
            b = find(r.new_id)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, list[IdRequest]] = defaultdict(list)
    for r in requests:
        groups[find(r.old_id)].append(r)
    return list(groups.values())


def _constant_finals(requests: Sequence[IdRequest]) -> dict[str, list[Interval]] | None:
    """The intervals when every id has one move-away and none is named as a new id after it
    (no re-use): then ``resolve`` follows the same edges at every version, so each id has one
    final on ``(-inf, inf)``. None when the component needs the general walk."""
    edge: dict[str, IdRequest] = {}
    for r in requests:
        if r.old_id in edge:
            return None
        edge[r.old_id] = r
    for r in requests:
        if (
            r.new_id is not None
            and (moved := edge.get(r.new_id)) is not None
            and r.executed_at > moved.executed_at
        ):
            return None
    out: dict[str, list[Interval]] = {}
    for ident in edge:
        path: list[IdRequest] = []
        seen: dict[str, int] = {}
        current: str | None = ident
        while True:
            if current is None or (step := edge.get(current)) is None:
                final = current
                break
            if step.new_id is None:
                final = None
                break
            seen[current] = len(path)
            path.append(step)
            current = step.new_id
            if current in seen:
                final = max(path[seen[current] :], key=_order).new_id
                break
        out[ident] = [(None, None, final)]
    return out


def collapse_component(requests: Sequence[IdRequest]) -> dict[str, list[Interval]]:
    """The intervals of every id with a move-away in one connected component."""
    fast = _constant_finals(requests)
    if fast is not None:
        return fast
    graph = TenantGraph.of(requests)
    times = sorted({r.executed_at for r in requests})
    # the final id is constant between consecutive request times: probe each (t[i-1], t[i]] at
    # t[i], and past the last at t[-1] + 1
    probes = [*times, times[-1] + 1]
    out: dict[str, list[Interval]] = {}
    for ident in graph.moves:
        intervals: list[Interval] = []
        for i, probe in enumerate(probes):
            final = resolve(graph, ident, probe)
            after = times[i - 1] if i > 0 else None
            upto = times[i] if i < len(times) else None
            if intervals and intervals[-1][2] == final:
                intervals[-1] = (intervals[-1][0], upto, final)
            else:
                intervals.append((after, upto, final))
        out[ident] = intervals
    return out


def collapse(
    requests: Iterable[IdRequest],
    *,
    group: Callable[[Sequence[IdRequest]], list[list[IdRequest]]] = components,
) -> dict[tuple[str, str], list[Interval]]:
    """Per ``(tenant, id)`` with a move-away, its final-id intervals (see the module docstring)."""
    by_tenant: dict[str, list[IdRequest]] = defaultdict(list)
    for r in unique_requests(requests):
        by_tenant[r.tenant].append(r)
    out: dict[tuple[str, str], list[Interval]] = {}
    for tenant, reqs in by_tenant.items():
        for component in group(reqs):
            for ident, intervals in collapse_component(component).items():
                out[(tenant, ident)] = intervals
    return out


def final_of(intervals: Sequence[Interval], ident: str, version: int) -> str | None:
    """Look a version up in an id's intervals (``ident`` itself when none covers it)."""
    for after, upto, final in intervals:
        if (after is None or version > after) and (upto is None or version <= upto):
            return final
    return ident


def as_mapping(collapsed: Mapping[tuple[str, str], list[Interval]]) -> dict[tuple[str, str], str | None]:
    """The ids whose every version has one final id, as ``(tenant, id) -> final``: a plain map."""
    return {k: v[0][2] for k, v in collapsed.items() if len(v) == 1}
