"""MemoryIndex is a faithful fake: one scenario gives the same answers on it and on the real
ElasticsearchIndex over noida-db (``stack`` fixture, ``tombstones="document"``, the mode whose
tombstones never expire, like the fake's). Fake-only behaviour is tested on its own below."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from framework.local_stack import StackInfo
from framework.testing import MemoryIndex
from stores.base import IndexOp, SearchIndex
from stores.elasticsearch.checks import DocumentError
from stores.elasticsearch.index import ElasticsearchIndex
from stores.errors import PermanentStoreError


async def scenario(index: SearchIndex, alias: str) -> list[Any]:
    """Every observable answer of a sequence of writes and reads."""
    out: list[Any] = [await index.ensure_index(alias, {"properties": {"n": {"type": "long"}}})]

    async def get(doc_id: str) -> Any:
        hit = await index.get(alias, doc_id)
        return None if hit is None else (hit.version, dict(hit.source))

    out += [await index.index(alias, "d1", {"n": 1, "tags": ("a", "b")}, 10), await get("d1")]
    out += [await index.index(alias, "d1", {"n": 0}, 5), await get("d1")]  # older: stale
    out += [await index.index(alias, "d1", {"n": 2}, 10), await get("d1")]  # equal: accepted
    out += [await index.delete(alias, "d1", 8), await get("d1")]  # older delete: stale
    out += [await index.delete(alias, "d1", 20), await get("d1")]
    out += [await index.index(alias, "d1", {"n": 3}, 15), await get("d1")]  # behind the tombstone
    out += [await index.delete(alias, "d9", 3), await index.index(alias, "d9", {"n": 9}, 2)]
    out += [await index.index(alias, "d1", {"n": 4}, 21), await get("d1")]
    ops = [
        IndexOp("d2", 5, {"n": 5}),
        IndexOp("d2", 4, {"n": 4}),
        IndexOp("d3", 1, None),
        IndexOp("", 1, {"n": 0}),
        IndexOp("d4", 7, {"n": 7}),
    ]
    result = await index.bulk(alias, ops)
    out.append([(i.doc_id, i.outcome) for i in result.items])
    await index.refresh(alias)
    out.append([(h.doc_id, h.version, dict(h.source)) for h in await index.search(alias, size=10)])
    slices = [sorted([h.doc_id async for h in index.scan(alias, slice_id=i, slices=2)]) for i in range(2)]
    out.append(sorted(slices[0] + slices[1]))
    out.append(not set(slices[0]) & set(slices[1]))
    out.append(await index.ensure_index(alias, generation=2))
    out.append(await get("d1"))  # the alias stays on v1
    out.append(await index.swap_alias(alias, f"{alias}-v2"))
    out.append(await get("d1"))
    return out


def expected(alias: str) -> list[Any]:
    """The answers Elasticsearch's rules give (``external_gte``, versioned tombstones)."""
    first = (10, {"n": 1, "tags": ["a", "b"]})
    return [
        f"{alias}-v1",
        *(True, first, False, first),
        *(True, (10, {"n": 2}), False, (10, {"n": 2})),
        *(True, None, False, None),
        *(True, False, True, (21, {"n": 4})),
        [("d2", "ok"), ("d2", "stale"), ("d3", "ok"), ("", "error"), ("d4", "ok")],
        [("d1", 21, {"n": 4}), ("d2", 5, {"n": 5}), ("d4", 7, {"n": 7})],
        ["d1", "d2", "d4"],
        True,
        f"{alias}-v2",
        (21, {"n": 4}),
        [f"{alias}-v1"],
        None,
    ]


@pytest.fixture()
async def es(stack: StackInfo) -> AsyncIterator[ElasticsearchIndex]:
    index = ElasticsearchIndex.from_url(stack.es_url, tombstones="document")
    yield index
    await index.close()


async def test_memory_index_answers_like_elasticsearch(es: ElasticsearchIndex) -> None:
    alias = f"kit-{uuid.uuid4().hex[:10]}"
    real = await scenario(es, alias)
    fake = await scenario(MemoryIndex(), alias)
    assert real == expected(alias)
    assert fake == real


async def test_search_sees_only_refreshed_writes_and_only_match_all() -> None:
    index = MemoryIndex()
    await index.ensure_index("a")
    await index.index("a", "x", {"n": 1}, 1)
    assert await index.search("a") == [] and (await index.get("a", "x")) is not None
    await index.refresh("a")
    assert [h.doc_id for h in await index.search("a", {"match_all": {}})] == ["x"]
    with pytest.raises(NotImplementedError, match="match_all"):
        await index.search("a", {"term": {"n": 1}})


async def test_writes_need_an_alias_and_reject_bad_documents() -> None:
    index = MemoryIndex()
    with pytest.raises(PermanentStoreError):
        await index.index("missing", "x", {"n": 1}, 1)
    await index.ensure_index("a")
    with pytest.raises(DocumentError):
        await index.index("a", "x", {"_id": "no"}, 1)
    with pytest.raises(DocumentError):
        await index.index("a", "x", {"n": float("nan")}, 1)
    with pytest.raises(DocumentError):
        await index.delete("a", "x", -1)
    hit_source = {"n": [1]}
    await index.index("a", "x", hit_source, 1)
    hit = await index.get("a", "x")
    assert hit is not None
    hit.source["n"].append(2)  # type: ignore[index]
    assert (await index.get("a", "x")).source == {"n": [1]}  # type: ignore[union-attr]
