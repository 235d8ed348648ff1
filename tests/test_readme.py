"""The README's "try an app" commands work as written, run by bash in a fresh directory.

The directory holds only a link to the project's ``.venv``, so the worker
finds the example app as an installed package and every default (stack
state, data dir, store, dead-letter WAL) lands in that directory.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def readme_block(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {name} -->\n```sh\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert match, f"no {name} block in the README"
    return match.group(1)


def test_the_try_an_app_commands_work(tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    script = "set -euo pipefail\ntrap 'converge stack down >/dev/null 2>&1 || true' EXIT\n"
    script += readme_block("try-an-app")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")}
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420
    )
    log = (tmp_path / "worker.log").read_text() if (tmp_path / "worker.log").exists() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-3000:]
    assert "consumed" in done.stdout and "published" in done.stdout
    assert "clean" in done.stdout.lower()
    verified = re.search(r"(\d+) documents verified from (\d+) entries; divergent: none", done.stdout)
    assert verified and int(verified[1]) >= 50, done.stdout[-3000:]  # every ticket, none divergent
    assert (tmp_path / "var" / "support-desk" / "wide.db").exists()
    assert not (tmp_path / ".converge" / "stack" / "state.json").exists() or "not running" in subprocess.run(
        ["bash", "-c", ". .venv/bin/activate && converge stack status"], cwd=tmp_path, capture_output=True,
        text=True, env=env,
    ).stdout  # fmt: skip
