"""A bare install (``pip install converge``, no extras) in a fresh venv runs a support desk worker.

Slow: the module's fixture builds the package from a copy of the repository's sources and
installs it with its dependencies into a new venv (from pip's cache where it can), about 20
to 40 s on the 2-core machine. The broker and the index are the session's embedded stack,
run from this (the dev) venv; the worker runs from the bare venv, outside the repository.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.dlq import DeadLetterWAL
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import StackInfo
from tests.examples.support_desk.compare import divergences, read_run

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: What the distribution is built from: pyproject.toml, the README it names, its packages.
SOURCES = (
    "pyproject.toml",
    PYPROJECT["project"]["readme"],
    *(p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]),
)
#: The packages of the extras that a stream worker must not need.
LEFT_OUT = ("pyspark", "pandas", "pyarrow", "matplotlib", "hypothesis", "kazoo", "noida_db", "moto", "boto3")
SEED = 7


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a fresh venv holding converge without any extra."""
    base = tmp_path_factory.mktemp("bare-install")
    source = base / "source"  # a copy: an in-tree build would reuse a stale build/lib
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
         "--no-compile", "--disable-pip-version-check", str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return venv / "bin"


def _env(**extra: str) -> dict[str, str]:
    """This environment without Python paths or converge settings, plus ``extra``."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    kept = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("CONVERGE_")}
    return {**kept, **extra}


def test_the_bare_install_leaves_out_every_extra(bare: Path, tmp_path: Path) -> None:
    probe = f"import importlib.util as u; print(*[m for m in {LEFT_OUT!r} if u.find_spec(m)])"
    done = subprocess.run(
        [bare / "python", "-c", probe], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (("spark", "check", "--app", "examples.support_desk.app:app"), "spark"),
        (("stack", "up"), "stack"),
        (("jobs", "status", "--locks", "zookeeper://127.0.0.1:1/converge"), "zookeeper"),
    ],
)
def test_a_command_needing_a_missing_extra_says_which_on_one_line(
    bare: Path, tmp_path: Path, command: tuple[str, ...], extra: str
) -> None:
    done = subprocess.run(
        [bare / "converge", *command], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    line = f"converge {' '.join(command[:2])}: error: "
    assert done.stderr.startswith(line) and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.rstrip().endswith(f"pip install 'converge[{extra}]'"), done.stderr


def test_dead_letter_object_storage_without_the_s3_extra_is_one_line(bare: Path, tmp_path: Path) -> None:
    DeadLetterWAL(tmp_path / "dlq").close()
    done = subprocess.run(  # every host's parked events, in the bucket: needs boto3
        [bare / "converge", "dlq", "list"], cwd=tmp_path,
        env=_env(CONVERGE_DLQ_OBJECTS="s3://parked/app"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("converge dlq list: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.rstrip().endswith("pip install 'converge[s3]'"), done.stderr


def test_a_support_desk_worker_runs_from_the_bare_install(
    bare: Path, stack: StackInfo, tmp_path: Path
) -> None:
    app_id = f"support-desk-bare-{uuid.uuid4().hex[:8]}"
    tenants = (f"{app_id}-a", f"{app_id}-b")
    history = generate_history(SEED, 12, tenants)
    broker = f"kafka://{stack.kafka_bootstrap}"
    store_url = f"sqlite:///{tmp_path / 'wide.db'}"

    async def publish() -> None:
        await ensure_topics(broker, {t: 4 for t in app.topics()})
        for topic, events in by_topic(deliver(history.events, SEED)).items():
            await produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in events])

    asyncio.run(publish())
    env = _env(
        CONVERGE_BROKER=broker,
        CONVERGE_ES_URL=stack.es_url,
        CONVERGE_ES_TOMBSTONES="document",
        CONVERGE_APP_ID=app_id,
        CONVERGE_DATA_DIR=str(tmp_path / "worker"),
        CONVERGE_WIDE_STORE=store_url,
        CONVERGE_PARTITIONS="4",
        CONVERGE_DENYLIST_STORE="target",  # a new store: the app's personal data needs a deny-list of record
    )
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [bare / "converge", "worker", "examples.support_desk.app:app"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        for topic in app.topics():
            drained = asyncio.run(wait_drained(broker, app_id, topic, 180))
            assert drained, f"{topic} not drained\n{log.read_text()[-4000:]}"
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            code = worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            code = worker.wait(10)
    assert code == 0, log.read_text()[-4000:]

    ours = {t.ticket_id for t in history.truth.tickets.values()}  # the topics hold other tests' events too
    (tickets, status_log, comments), docs = asyncio.run(read_run(store_url, stack.es_url, set(tenants), ours))
    assert tickets and status_log and docs
    found = divergences(history, tickets, status_log, comments, docs)
    assert not found, "\n".join(map(str, found[:30]))
