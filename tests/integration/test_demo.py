"""The demo's convergence check on a small history, end to end through the CLI."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents import INDEX_ALIAS
from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.oracle import expected_state
from examples.demo import check_convergence
from framework.aggregates.contributions import ContributionIndex
from framework.aggregates.totals import recompute
from framework.local_stack import LocalStack
from framework.runtime.mapping import map_event
from framework.runtime.projector import project_partition
from stores.elasticsearch.index import ElasticsearchIndex
from stores.open import open_wide_store

pytestmark = pytest.mark.slow


def test_demo_converges_on_a_small_history(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "framework.cli", "demo", "--events", "1500", "--seed", "11",
         "--workdir", str(tmp_path), "--chart", str(tmp_path / "aggregates.png")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "divergent entities" in out.stdout
    line = next(x for x in out.stdout.splitlines() if "divergent entities" in x)
    assert line.split()[-2] == "0"
    duplicates = next(x for x in out.stdout.splitlines() if "duplicates and replays" in x)
    assert int(duplicates.split()[-2].replace(",", "")) > 0
    assert "s3://converge-dlq/activity-platform" in out.stdout
    objects = next(x for x in out.stdout.splitlines() if "segment objects in the bucket" in x)
    assert objects.split()[-2] == "0"  # the history parks nothing, so nothing is uploaded
    figures = [x.split("│") for x in out.stdout.splitlines() if "engagement_daily" in x or "owner_daily" in x]
    assert len(figures) == 2, out.stdout[-3000:]
    for cells in figures:  # aggregate, first measure, stream, oracle, groups, groups differing
        stream, oracle, groups, differing = (c.strip().replace(",", "") for c in cells[3:7])
        assert stream == oracle and int(stream) > 0 and int(groups) > 0 and differing == "0", cells
    assert (tmp_path / "aggregates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_reports_divergence_when_the_index_is_corrupted(tmp_path: Path) -> None:
    """The checker is not blind: a document removed behind the pipeline's back is reported."""

    history = generate_history(3, 300)
    with LocalStack(tmp_path / "stack") as stack:
        assert stack.info is not None
        store_url = f"sqlite:///{tmp_path / 'wide.db'}"

        async def run() -> tuple[int, int]:
            store = await open_wide_store(store_url)
            for t in app.tables:
                await store.ensure_table(t)
            index = ElasticsearchIndex.from_url(stack.info.es_url, tombstones="document")
            (projection,) = app.projections
            await index.ensure_index(projection.alias, projection.mappings)
            offsets = itertools.count(1)

            async def totals(aggregate: Any, groups: Any) -> None:  # the totals processor's step
                await recompute(store, aggregate, dict.fromkeys((g for g, _ in groups), next(offsets)))

            contributions = ContributionIndex(store, app.aggregates, totals)
            touched: dict[str, set[str]] = {}
            for e in history.events:
                muts = map_event(app.route(e), e, app.views)
                await store.apply(muts)
                for v in app.views:
                    touched.setdefault(v.name, set()).update(v.touched(muts))
            for v in app.views:
                target = index if v is projection else contributions
                for doc_id in sorted(touched[v.name]):
                    key = dict(zip([c.name for c in v.partition_key], doc_id.split(":"), strict=True))
                    await project_partition(store, target, v, key)
            clean = len((await check_convergence(history, store_url, stack.info.es_url)).divergences)
            victim = sorted(expected_state(history.truth).documents)[0]
            await index.client.delete(index=f"{INDEX_ALIAS}-v1", id=victim, refresh=True)
            await store.close()
            await index.close()
            after = await check_convergence(history, store_url, stack.info.es_url)
            return clean, len([d for d in after.divergences if d.key == victim])

        clean, victim_divergences = asyncio.run(run())
    assert clean == 0
    assert victim_divergences == 1
