"""``converge jobs status``: holders, last runner, jobs and checkpoints, on SQLite and ZooKeeper."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from framework.cli import main
from framework.coordination import open_checkpoint_store, open_domain_locks
from framework.jobs import CoordinatorSettings, JobCoordinator
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]


@pytest.fixture(params=["sqlite", "zookeeper"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/jobs.db", f"sqlite:///{tmp_path}/jobs.db"
    server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
    root = f"converge-test/{uuid.uuid4().hex}"
    return f"zookeeper://{server.hosts}/{root}/jobs", f"zookeeper://{server.hosts}/{root}/cp"


def _two_turns_and_a_holder(locks_url: str, cp_url: str) -> object:
    """ingest and retention take a turn each (checkpoints 100, 7); erasure then holds the lock."""
    locks = open_domain_locks(locks_url)
    cps = open_checkpoint_store(cp_url)
    cycle = {"ingest": "erasure", "retention": "ingest", "erasure": "retention"}
    jobs = {
        job: JobCoordinator(
            locks, CoordinatorSettings("activity", job, before, start_with="ingest", holder=f"{job}@test:1"),
            checkpoints=cps,
        )
        for job, before in cycle.items()
    }  # fmt: skip
    jobs["ingest"].run_round_sync(lambda t: "100")
    jobs["retention"].run_round_sync(lambda t: "7")
    held = jobs["erasure"].turn_sync()
    assert held.__enter__()
    return locks, cps, held


def test_status_shows_holder_last_runner_jobs_and_checkpoints(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    locks, cps, held = _two_turns_and_a_holder(*urls)
    try:
        assert main(["jobs", "status", "--locks", urls[0], "--checkpoints", urls[1]]) == 0
        out = capsys.readouterr().out
        assert "domain activity" in out
        assert "holder       erasure@test:1" in out
        assert "last runner  erasure, round 3, started" in out
        assert "ingest (after erasure, starts the cycle)" in out and "checkpoint '100' (v0)" in out
        assert "retention (after ingest)" in out and "checkpoint '7' (v0)" in out
        assert "erasure (after retention)" in out and "checkpoint -" in out

        assert main(["jobs", "status", "--locks", urls[0], "--domain", "activity", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        (domain,) = report["domains"]
        assert domain["holder"] == "erasure@test:1" and domain["expired_lease"] is None
        assert {k: domain["last_runner"][k] for k in ("job", "round", "state")} == {
            "job": "erasure", "round": 3, "state": "started"
        }  # fmt: skip
        assert [(j["job"], j["predecessor"]) for j in domain["jobs"]] == [
            ("erasure", "retention"), ("ingest", "erasure"), ("retention", "ingest")
        ]  # fmt: skip
        assert "checkpoint" not in domain["jobs"][0]  # only with --checkpoints
    finally:
        held.__exit__(None, None, None)  # type: ignore[attr-defined]
        locks.close()  # type: ignore[attr-defined]
        cps.close_sync()  # type: ignore[attr-defined]
    assert main(["jobs", "status", "--locks", urls[0], "--json"]) == 0
    (domain,) = json.loads(capsys.readouterr().out)["domains"]
    assert domain["holder"] is None and domain["last_runner"]["state"] == "done"


def test_status_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = f"sqlite:///{tmp_path}/none.db"
    assert main(["jobs", "status", "--locks", missing]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no job locks at" in err
    url = f"sqlite:///{tmp_path}/jobs.db"
    open_domain_locks(url).close()
    assert main(["jobs", "status", "--locks", url]) == 0
    assert "no lock domains" in capsys.readouterr().out
    assert main(["jobs", "status", "--locks", url, "--domain", "nothing"]) == 2
    assert "no lock domain 'nothing'" in capsys.readouterr().err
    assert main(["jobs", "status", "--locks", "redis://x"]) == 1
    assert "job lock URL 'redis://x': unknown scheme" in capsys.readouterr().err
