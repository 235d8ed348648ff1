"""The one coordination URL parser: what each URL names, and one error type and message format."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.coordination import CheckpointError, CoordinationUrlError, JobLockError
from framework.coordination.urls import CoordinationUrl, parse_coordination_url


def test_urls_name_a_sqlite_file_or_an_ensemble_and_root() -> None:
    assert parse_coordination_url("sqlite:///a/b.db", "x") == CoordinationUrl("sqlite", path=Path("a/b.db"))
    assert parse_coordination_url("sqlite:////abs/b.db", "x").path == Path("/abs/b.db")
    zk = parse_coordination_url("zookeeper://h1:2181,h2:2181/converge/jobs", "x")
    assert zk == CoordinationUrl("zookeeper", hosts="h1:2181,h2:2181", root="/converge/jobs")
    assert parse_coordination_url("zookeeper://h1:2181", "x").root is None
    assert parse_coordination_url("zookeeper://h1:2181/", "x").root is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("nothing", "expected sqlite:///PATH or zookeeper://HOSTS/ROOT"),
        ("sqlite://", "expected sqlite:///PATH or zookeeper://HOSTS/ROOT"),
        ("sqlite://relative", "expected sqlite:///relative/path or sqlite:////absolute/path"),
        ("zookeeper:///root", "no ZooKeeper hosts"),
        ("redis://x", "unknown scheme 'redis' (sqlite or zookeeper)"),
    ],
)
def test_bad_urls_raise_one_error_with_one_message_format(url: str, problem: str) -> None:
    with pytest.raises(CoordinationUrlError) as caught:
        parse_coordination_url(url, "job lock")
    assert str(caught.value) == f"job lock URL {url!r}: {problem}"
    assert isinstance(caught.value, CheckpointError) and isinstance(caught.value, JobLockError)
