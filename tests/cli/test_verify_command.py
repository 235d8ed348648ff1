"""``converge verify --once`` after a live worker: index documents deleted and edited behind the
framework's back are found and repaired; a document put ahead of its mark is parked in the
dead-letter log, from which ``converge dlq list`` shows it.

Real parts: a noida-db of its own (Kafka and Elasticsearch), a ``converge worker`` subprocess
of the support desk with notifications on, a SQLite store and checkpoint file.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from framework.cli import main
from framework.local_stack import LocalStack
from tests.notifications.live_desk import LiveDesk

SEED = 23


def _settings_of(desk: LiveDesk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's settings for the commands, their data dir apart."""
    for name, value in desk.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CONVERGE_DATA_DIR", str(tmp_path / "verify"))


@pytest.mark.timeout(300)
def test_verify_once_repairs_what_was_damaged_and_parks_what_is_ahead(
    fresh_stack: LocalStack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert fresh_stack.info is not None
    desk = LiveDesk.create(
        fresh_stack, tmp_path, SEED, CONVERGE_BROKER=f"kafka://{fresh_stack.info.kafka_bootstrap}"
    )
    desk.produce()
    desk.run_worker()
    written = desk.documents()
    assert len(written) > 4
    ids = sorted(written)[:4]
    desk.damage(written, ids, ahead=True)

    _settings_of(desk, tmp_path, monkeypatch)
    dlq = tmp_path / "verify-dlq"
    verify = ["verify", "--app", "tests.notifications.notified_desk:app", "--once", "--settle", "0",
              "--recheck", "0", "--dlq-root", str(dlq), "--json"]  # fmt: skip
    assert main(verify) == 1  # a divergence was parked
    report = json.loads(capsys.readouterr().out)
    assert report["divergent"] == {"missing": 2, "orphaned": 0, "stale": 0, "ahead": 1, "content": 1}
    assert report["repaired"] == {"missing": 2, "orphaned": 0, "stale": 0, "ahead": 0, "content": 1}
    assert report["parked"]["ahead"] == 1 and report["verified"] >= len(written)
    after = desk.documents()
    assert {k: v for k, v in after.items() if k != ids[3]} == {
        k: v for k, v in written.items() if k != ids[3]
    }
    assert after[ids[3]][0]["edited"] == "ahead"  # not written: an operator decides

    assert main(["dlq", "show", "--root", str(dlq), "--stage", "verify", "--json"]) == 0
    (shown,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (shown["pipeline"], shown["error_class"]) == ("verify.tickets", "ahead")
    assert base64.b64decode(shown["key"]).decode() == ids[3]  # replayed, it re-projects the partition

    assert main(verify[:-3] + ["--dlq-root", str(tmp_path / "again"), "--json"]) == 0  # checkpointed
    again = json.loads(capsys.readouterr().out)
    assert again["entries"] == 0 and sum(again["divergent"].values()) == 0


@pytest.mark.timeout(300)
def test_verify_sweep_finds_damage_no_notification_names(
    fresh_stack: LocalStack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first ``--sweep`` records every document right; damage done later, with every entry
    already verified, is found only by the next sweep, which builds just the damaged documents."""
    assert fresh_stack.info is not None
    desk = LiveDesk.create(
        fresh_stack, tmp_path, SEED + 1, CONVERGE_BROKER=f"kafka://{fresh_stack.info.kafka_bootstrap}"
    )
    desk.produce()
    desk.run_worker()
    written = desk.documents()
    assert len(written) > 4
    _settings_of(desk, tmp_path, monkeypatch)
    verify = ["verify", "--app", "tests.notifications.notified_desk:app", "--once", "--settle", "0",
              "--recheck", "0", "--dlq-root", str(tmp_path / "dlq"), "--json", "--sweep"]  # fmt: skip

    assert main(verify) == 0
    first, _ = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert first["sweep"]["verified_in_full"] >= len(written)
    assert sum(first["sweep"]["divergent"].values()) == 0

    ids = sorted(written)[:3]
    desk.damage(written, ids)
    assert main(verify) == 0
    second, stats = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert stats["entries"] == 0  # every entry was verified by the first run: only the sweep saw it
    assert second["sweep"]["divergent"] == {"missing": 2, "content": 1}
    assert second["sweep"]["repaired"] == second["sweep"]["divergent"]
    assert second["sweep"]["verified_in_full"] == 3 and second["sweep"]["index_read"] >= len(written) - 2
    assert desk.documents() == written
