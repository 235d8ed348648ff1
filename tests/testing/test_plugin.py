"""The pytest plugin: declared as a ``pytest11`` entry point; its fixtures work in a fresh pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

APP_TEST = """
import json
import socket
import urllib.request

from framework.testing import make_event
from tests.testing.apps import shop


def test_driver_fixture(converge_driver):
    driver = converge_driver(shop())
    driver.send(make_event("item.set", {"item": "a", "name": "Lamp"}, version=5))
    assert driver.documents("catalog") == {"a": ({"item_id": "a", "name": "Lamp"}, 5)}


def test_stack_fixture(converge_stack):
    with urllib.request.urlopen(converge_stack.es_url + "/", timeout=5) as resp:
        assert "version" in json.loads(resp.read())
    with socket.create_connection((converge_stack.host, converge_stack.kafka_port), timeout=5):
        pass


def test_stack_is_shared(converge_stack, request):
    assert request.getfixturevalue("converge_stack") is converge_stack
"""


def _declared() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]


def test_the_entry_point_is_declared() -> None:
    assert _declared() == {"converge": "framework.testing.plugin"}


def test_fixtures_in_a_fresh_pytest_run_that_loads_the_plugin_by_its_entry_point(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_app.py").write_text(textwrap.dedent(APP_TEST))
    # Until the package is reinstalled, its metadata lacks the entry point: declare the same one
    # in a probe distribution on PYTHONPATH (pytest skips a second plugin of the same name).
    probe = tmp_path / "site" / "converge_plugin_probe-0.dist-info"
    probe.mkdir(parents=True)
    (probe / "METADATA").write_text("Metadata-Version: 2.1\nName: converge-plugin-probe\nVersion: 0\n")
    lines = [f"{name} = {value}" for name, value in _declared().items()]
    (probe / "entry_points.txt").write_text("[pytest11]\n" + "\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "tests"), "-q", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout
