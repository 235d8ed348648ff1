"""The ID mutation benchmark's request mix and owner rows, and the connected-components variants
the benchmark compares (the reference union-find, networkx, scipy.sparse.csgraph).

Mix of ``n`` requests over ``tenants`` tenants: 30 % in chains of 2-5 requests, 10 % in merges
of 2-4 old ids into one new id, 5 % deletes (of an id no request touched), the rest single
converts. Execution times increase along a chain. Every old id owns ``rows_per_owner`` rows of
the owner table; ``untouched`` owners more that no request names fill it to ``rows``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence

from framework.core.mutations import Upsert
from framework.core.schema import Column, TableSchema
from framework.idmutation import IdRequest

__all__ = ["OWNED", "request_mix", "owner_rows", "by_networkx", "by_scipy", "GROUPERS"]

OWNED = TableSchema(
    "owned",
    (Column("tenant", "text"), Column("owner", "text")),
    (Column("a", "text"), Column("b", "text")),
    (Column("item", "text"),),
)
T0 = 1_700_000_000_000_000


def request_mix(n: int, tenants: int, seed: int = 15) -> list[IdRequest]:
    """``n`` requests in the mix of the module docstring."""
    rng = random.Random(seed)
    out: list[IdRequest] = []
    counters: defaultdict[str, int] = defaultdict(int)

    def new_id(tenant: str) -> str:
        counters[tenant] += 1
        return f"o{counters[tenant]:07d}"

    def add(tenant: str, op: str, old: str, new: str | None, at: int) -> None:
        out.append(IdRequest(executed_at=at, request_id=f"q{len(out):07d}", tenant=tenant, op=op,  # type: ignore[arg-type]
                             old_id=old, new_id=new))  # fmt: skip

    quota = {"chain": int(n * 0.30), "merge": int(n * 0.10), "delete": int(n * 0.05)}
    quota["single"] = n - sum(quota.values())
    while len(out) < n:
        tenant = f"t{rng.randrange(tenants):03d}"
        at = T0 + rng.randrange(10**12)
        kinds = [k for k, left in quota.items() if left > 0]
        kind = rng.choice(kinds)
        if kind == "chain":
            length = min(rng.randint(2, 5), quota["chain"])
            ids = [new_id(tenant) for _ in range(length + 1)]
            for i in range(length):
                add(tenant, "convert", ids[i], ids[i + 1], at + i * 1_000_000)
            quota["chain"] -= length
        elif kind == "merge":
            width = min(rng.randint(2, 4), quota["merge"])
            target = new_id(tenant)
            for _ in range(width):
                add(tenant, "merge", new_id(tenant), target, at)
            quota["merge"] -= width
        elif kind == "delete":
            add(tenant, "delete", new_id(tenant), None, at)
            quota["delete"] -= 1
        else:
            add(tenant, "convert", new_id(tenant), new_id(tenant), at)
            quota["single"] -= 1
    return out


def owner_rows(requests: Sequence[IdRequest], rows: int, rows_per_owner: int = 5) -> Iterator[Upsert]:
    """Rows of ``OWNED``: ``rows_per_owner`` under each old id, then untouched owners up to ``rows``."""
    n = 0
    owners = sorted({(r.tenant, r.old_id) for r in requests})
    tenants = sorted({t for t, _ in owners}) or ["t000"]
    i = 0
    while n < rows:
        if i < len(owners):
            tenant, owner = owners[i]
        else:
            tenant, owner = tenants[i % len(tenants)], f"u{i:08d}"
        for j in range(min(rows_per_owner, rows - n)):
            key = {"tenant": tenant, "owner": owner, "item": f"i{j}"}
            yield Upsert("owned", key, {"a": f"a{n}", "b": f"b{n}"}, T0 - 1_000_000 + j)
            n += 1
        i += 1


def _groups(
    requests: Sequence[IdRequest], labels: Sequence[int], index: dict[str, int]
) -> list[list[IdRequest]]:
    groups: dict[int, list[IdRequest]] = defaultdict(list)
    for r in requests:
        groups[labels[index[r.old_id]]].append(r)
    return list(groups.values())


def _index(requests: Sequence[IdRequest]) -> dict[str, int]:
    index: dict[str, int] = {}
    for r in requests:
        index.setdefault(r.old_id, len(index))
        if r.new_id is not None:
            index.setdefault(r.new_id, len(index))
    return index


def by_networkx(requests: Sequence[IdRequest]) -> list[list[IdRequest]]:
    """Requests grouped by networkx's connected components (a Graph of ids)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(r.old_id for r in requests)
    g.add_edges_from((r.old_id, r.new_id) for r in requests if r.new_id is not None)
    label = {}
    for n, comp in enumerate(nx.connected_components(g)):
        for ident in comp:
            label[ident] = n
    groups: dict[int, list[IdRequest]] = defaultdict(list)
    for r in requests:
        groups[label[r.old_id]].append(r)
    return list(groups.values())


def by_scipy(requests: Sequence[IdRequest]) -> list[list[IdRequest]]:
    """Requests grouped by ``scipy.sparse.csgraph.connected_components`` (ids numbered first)."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    index = _index(requests)
    edges = [(index[r.old_id], index[r.new_id]) for r in requests if r.new_id is not None]
    rows = np.fromiter((a for a, _ in edges), dtype=np.int64, count=len(edges))
    cols = np.fromiter((b for _, b in edges), dtype=np.int64, count=len(edges))
    m = coo_matrix((np.ones(len(edges), dtype=np.int8), (rows, cols)), shape=(len(index), len(index)))
    _, labels = connected_components(m, directed=False)
    return _groups(requests, labels.tolist(), index)


def _reference(requests: Sequence[IdRequest]) -> list[list[IdRequest]]:
    from framework.idmutation.collapse import components

    return components(requests)


GROUPERS = {"union-find": _reference, "networkx": by_networkx, "scipy": by_scipy}
