"""The extras of pyproject.toml and ``framework.core.extras``: one list, and one error line."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from framework.core.errors import ConvergeError
from framework.core.extras import EXTRAS, MissingExtra, missing_extra, needs_extra

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _module(requirement: str) -> str:
    """The top-level module of a requirement's distribution (``noida-db>=0.2`` -> ``noida_db``)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return name.group().lower().replace("-", "_")


def test_every_extra_of_the_helper_is_declared_with_its_packages() -> None:
    declared = PROJECT["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert set(modules) <= {_module(r) for r in declared[extra]}, extra
    assert declared["all"] == [f"converge[{','.join(EXTRAS)}]"]
    assert "converge[all,docs]" in declared["dev"]


def test_the_core_dependencies_hold_no_package_of_an_extra() -> None:
    core = {_module(r) for r in PROJECT["dependencies"]}
    assert not core & {m for modules in EXTRAS.values() for m in modules}


def test_a_missing_package_of_an_extra_names_the_extra_to_install() -> None:
    error = missing_extra(ModuleNotFoundError("No module named 'pyspark.sql'", name="pyspark.sql"))
    assert isinstance(error, MissingExtra) and isinstance(error, ConvergeError | ImportError)
    assert str(error) == (
        "the 'spark' extra is not installed (no module named 'pyspark'): pip install 'converge[spark]'"
    )
    other = ModuleNotFoundError("No module named 'nothing_here'", name="nothing_here")
    assert missing_extra(other) is None and missing_extra(ValueError("x")) is None


def test_needs_extra_turns_the_import_error_into_one_line_and_lets_others_through() -> None:
    with pytest.raises(MissingExtra, match=r"^the chart needs the 'report' extra .*converge\[report\]'$"):
        with needs_extra("the chart"):
            raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
    with pytest.raises(ModuleNotFoundError, match="nothing_here"):
        with needs_extra("the chart"):
            import nothing_here  # type: ignore[import-not-found]  # noqa: F401


def test_the_test_kit_and_its_pytest_plugin_load_without_hypothesis() -> None:
    probe = (
        "import sys; sys.modules['hypothesis'] = None\n"  # as if not installed
        "import framework.testing.plugin\n"
        "from framework.testing import Driver, make_event\n"
        "try:\n"
        "    from framework.testing import deliveries\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "MissingExtra framework.testing's Hypothesis support needs the 'testing' extra (no module "
        "named 'hypothesis'): pip install 'converge[testing]'\n"
    )
