"""The change verifier's figures as a worker exports them: ``/metrics`` families, read back by
``converge status``'s summary. The figures come from a real verifier run over the support
desk (see ``test_verifier``), with documents deleted behind the framework's back."""

from __future__ import annotations

import asyncio
import dataclasses
import urllib.error
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from framework.metrics import ConvergeCollector, Snapshot, names
from framework.metrics.summary import fetch_metrics, summarize, summarize_verify
from framework.metrics.verifier_endpoint import serve_verifier_metrics
from framework.testing import Driver
from framework.verify.digests import Ledger
from framework.verify.sweep import Sweep
from tests.verify.test_verifier import Example, activity_platform, drain, support_desk, verifier


def _text(snap: Snapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConvergeCollector(lambda: snap))
    return generate_latest(registry).decode()


def test_a_verifiers_figures_reach_the_metrics_and_the_status_summary(tmp_path: Path) -> None:
    ex = support_desk()
    with Driver(ex.app) as d:
        assert d.send(ex.events) == []
        view = d.app.projections[0]
        for doc_id in sorted(ex.documents)[:2]:
            d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        v = verifier(d, tmp_path)
        drain(d, v)
    stats = v.stats.to_dict()
    assert stats["repaired"]["missing"] == 2 and stats["verified"] > 2
    text = _text(Snapshot(verify={**stats, "behind_seconds": 31.5}))
    for metric in (*names.VERIFY_COUNTERS.values(), *names.VERIFY_BY_CATEGORY.values()):
        assert f"{metric}_total" in text
    summary = summarize_verify(text)
    assert summary is not None and summarize(text) == {}  # no runtime rows from these
    assert (summary.documents, summary.entries, summary.errors) == (stats["verified"], stats["entries"], 0)
    assert summary.divergent == stats["divergent"] and summary.repaired == stats["repaired"]
    assert summary.parked == stats["parked"] and summary.behind_s == 31.5
    assert summary.lag_p50_s == round(stats["lag_p50_seconds"], 1)
    assert summary.lag_p99_s == round(stats["lag_p99_seconds"], 1)


def test_a_worker_without_a_verifier_exports_none_of_its_metrics() -> None:
    text = _text(Snapshot())
    assert "converge_verify" not in text and summarize_verify(text) is None


def test_quantiles_come_from_the_buckets_as_prometheus_estimates_them() -> None:
    from framework.metrics.summary import bucket_quantile

    inf = float("inf")
    assert bucket_quantile([], 0.5) is None and bucket_quantile([(1.0, 0), (inf, 0)], 0.5) is None
    buckets = [(10.0, 0), (20.0, 50), (30.0, 100), (inf, 100)]
    assert bucket_quantile(buckets, 0.5) == 20.0  # the 50th of 100 documents ends the (10, 20] bucket
    assert bucket_quantile(buckets, 0.25) == 15.0  # halfway into it
    assert bucket_quantile(buckets, 0.99) == 29.8
    assert bucket_quantile([(10.0, 1), (inf, 4)], 0.9) == 10.0  # past the last finite bound: that bound


@pytest.mark.parametrize("example", [support_desk, activity_platform], ids=["desk", "platform"])
def test_the_standalone_verifier_serves_its_figures_on_loopback(
    tmp_path: Path, example: Callable[[], Example]
) -> None:
    """``converge verify --metrics-port``'s server, fetched as ``converge status --url`` does."""
    ex = example()
    with Driver(ex.app) as d:
        assert d.send(ex.events) == []
        view = d.app.projections[0]
        doc_id = sorted(ex.documents)[0]
        d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        v = verifier(d, tmp_path)
        drain(d, v)
        sweep = Sweep(v, Ledger(d.store, d.app.name))
        d.run(sweep.ensure())
        d.run(sweep.run())

    async def scrape(token: str | None, sent: str | None) -> str:
        runner, port = await serve_verifier_metrics(lambda: v.stats, 0, token=token)
        try:
            assert runner.addresses[0][0] == "127.0.0.1"
            url = f"http://127.0.0.1:{port}"
            return await asyncio.to_thread(fetch_metrics, url, token=sent)
        finally:
            await runner.cleanup()

    summary = summarize_verify(asyncio.run(scrape(None, None)))
    stats = v.stats.to_dict()
    assert summary is not None and summary.documents == stats["verified"] > 0
    assert summary.repaired["missing"] == 1 and summary.entries == stats["entries"] > 0
    assert summary.behind_s is not None and summary.sweeps == 1 and summary.last_sweep_age_s is not None
    again = summarize_verify(asyncio.run(scrape("s3cret", "s3cret")))
    assert again is not None  # the ages move with the clock between the two scrapes
    assert dataclasses.replace(again, behind_s=None, last_sweep_age_s=None) == dataclasses.replace(
        summary, behind_s=None, last_sweep_age_s=None
    )
    with pytest.raises(urllib.error.HTTPError, match="401"):
        asyncio.run(scrape("s3cret", "wrong"))
