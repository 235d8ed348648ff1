"""Property: versioned writes converge in ElasticsearchIndex whatever their order (real noida-db).

Each example writes a random history of versioned index/delete writes for
many documents, duplicated and shuffled, through a random mix of bulk
requests and single calls, then reads every document back. The oracle:
the write with the highest version wins (``external_gte``). Versions are
unique per document (a duplicate is an exact copy), since a delete and an
index write at the same version are order-dependent by design.

Many documents share one example (one index, fresh ids per example) so the
examples stay cheap: 250 examples per tombstone mode, 500 in all.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.local_stack import StackInfo
from stores.base import IndexOp
from stores.elasticsearch.index import ElasticsearchIndex

EXAMPLES_PER_MODE = 250
MAPPINGS = {"dynamic": "strict", "properties": {"v": {"type": "long"}, "tag": {"type": "keyword"}}}


@dataclass(frozen=True)
class Write:
    doc: int
    version: int
    body: dict[str, Any] | None  # None: delete


@dataclass(frozen=True)
class Plan:
    writes: list[Write]  # the distinct writes (the oracle's input)
    order: list[Write]  # duplicated and shuffled
    chunks: list[tuple[int, bool]]  # (size, as bulk?) slices of ``order``


@st.composite
def plans(draw: st.DrawFn, deletes: bool) -> Plan:
    writes: list[Write] = []
    for doc in range(draw(st.integers(1, 15))):
        versions = draw(st.lists(st.integers(0, 40), min_size=1, max_size=6, unique=True))
        for v in versions:
            if deletes and draw(st.integers(0, 3)) == 0:
                writes.append(Write(doc, v, None))
            else:
                writes.append(Write(doc, v, {"v": v, "tag": draw(st.sampled_from("abc"))}))
    dups = draw(st.lists(st.sampled_from(writes), max_size=len(writes)))
    order = draw(st.permutations(writes + dups))
    chunks: list[tuple[int, bool]] = []
    left = len(order)
    while left:
        size = min(left, draw(st.integers(1, 25)))
        chunks.append((size, draw(st.integers(0, 4)) > 0))
        left -= size
    return Plan(writes, order, chunks)


def _is_noida(url: str) -> bool:
    with urllib.request.urlopen(url + "/", timeout=5) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read()).get("cluster_uuid") == "noida-local"


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


async def _apply(es: ElasticsearchIndex, alias: str, prefix: str, plan: Plan) -> None:
    pos = 0
    for size, as_bulk in plan.chunks:
        part = plan.order[pos : pos + size]
        pos += size
        if as_bulk:
            result = await es.bulk(alias, [IndexOp(f"{prefix}{w.doc}", w.version, w.body) for w in part])
            assert result.failed == [], result.failed
            continue
        for w in part:
            if w.body is None:
                await es.delete(alias, f"{prefix}{w.doc}", w.version)
            else:
                await es.index(alias, f"{prefix}{w.doc}", w.body, w.version)


async def _check(es: ElasticsearchIndex, alias: str, prefix: str, plan: Plan) -> None:
    latest: dict[int, Write] = {}
    for w in plan.writes:
        if w.doc not in latest or w.version > latest[w.doc].version:
            latest[w.doc] = w
    for doc, w in latest.items():
        hit = await es.get(alias, f"{prefix}{doc}")
        if w.body is None:
            assert hit is None, (doc, w, hit)
        else:
            assert hit is not None, (doc, w)
            assert (hit.version, dict(hit.source)) == (w.version, w.body), (doc, w, hit)


def _run_property(stack: StackInfo, loop: asyncio.AbstractEventLoop, mode: str, deletes: bool) -> None:
    es = ElasticsearchIndex.from_url(stack.es_url, tombstones=mode)  # type: ignore[arg-type]
    alias = f"conv-{mode}-{uuid.uuid4().hex[:8]}"
    loop.run_until_complete(es.ensure_index(alias, MAPPINGS))
    ran: list[int] = []

    @settings(
        max_examples=EXAMPLES_PER_MODE,
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan=plans(deletes))
    def prop(plan: Plan) -> None:
        prefix = uuid.uuid4().hex[:12] + "-"
        loop.run_until_complete(_apply(es, alias, prefix, plan))
        loop.run_until_complete(_check(es, alias, prefix, plan))
        ran.append(len(plan.order))

    try:
        prop()
    finally:
        loop.run_until_complete(es.close())
    assert len(ran) >= EXAMPLES_PER_MODE


def test_document_tombstones_converge(stack: StackInfo, loop: asyncio.AbstractEventLoop) -> None:
    _run_property(stack, loop, "document", deletes=True)


def test_native_tombstones_converge(stack: StackInfo, loop: asyncio.AbstractEventLoop) -> None:
    """On real Elasticsearch with deletes; on noida-db (no delete tombstones) index writes only."""
    _run_property(stack, loop, "native", deletes=not _is_noida(stack.es_url))
