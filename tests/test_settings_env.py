"""Settings own every environment variable: no module of the library reads one but ``framework.settings``.

An AST scan of ``framework``, ``stores`` and ``spark_batch``: ``os.environ.get(...)``,
``os.environ[...]`` (read), ``NAME in os.environ`` and ``os.getenv(...)`` (also through
``from os import environ, getenv``) count as reads. Writing a variable, ``setdefault`` and
copying the environment for a child process (``{**os.environ, ...}``) do not. A read of
another program's variable by its literal name (``PYTHONPATH``, extended for Spark's workers)
is allowed; a ``CONVERGE_*`` name or a computed one is not.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.settings import ENV, Settings, env_setting

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("framework", "stores", "spark_batch")
SETTINGS = ROOT / "framework" / "settings.py"


def _is_os(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "os"


def _is_environ(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and _is_os(node.value)
    return isinstance(node, ast.Name) and node.id in aliases


def _names_environ(node: ast.AST, aliases: set[str]) -> bool:
    """``node`` is the environment or an expression choosing it (``os.environ if x else y``)."""
    return any(_is_environ(n, aliases) for n in ast.walk(node))


def _allowed_key(key: ast.AST | None) -> bool:
    return (
        isinstance(key, ast.Constant) and isinstance(key.value, str) and not key.value.startswith("CONVERGE")
    )


def env_reads(source: str) -> Iterator[int]:
    """Line numbers of the environment reads in ``source`` (see the module docstring)."""
    tree = ast.parse(source)
    environ, getenv = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                (environ if alias.name == "environ" else getenv if alias.name == "getenv" else set()).add(
                    alias.asname or alias.name
                )
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            key = node.args[0] if node.args else None
            os_getenv = isinstance(f, ast.Attribute) and f.attr == "getenv" and _is_os(f.value)
            getenv_call = os_getenv or (isinstance(f, ast.Name) and f.id in getenv)
            get_call = isinstance(f, ast.Attribute) and f.attr == "get" and _names_environ(f.value, environ)
            if (getenv_call or get_call) and not _allowed_key(key):
                yield node.lineno
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _is_environ(node.value, environ) and not _allowed_key(node.slice):
                yield node.lineno
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            if any(_is_environ(c, environ) for c in node.comparators) and not _allowed_key(node.left):
                yield node.lineno


def _modules() -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) if p != SETTINGS]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_but_the_settings_reads_the_environment(path: Path) -> None:
    lines = list(env_reads(path.read_text()))
    assert not lines, (
        f"{path.relative_to(ROOT)} reads the environment at lines {lines}: use framework.settings"
    )


def test_the_scan_sees_every_form_of_read() -> None:
    reads = """
import os
from os import environ as env, getenv
a = os.environ.get("CONVERGE_X")
b = os.environ["CONVERGE_Y"]
c = env.get(NAME)
g = (os.environ if m is None else m).get("CONVERGE_U")
d = getenv("CONVERGE_Z")
e = os.getenv("CONVERGE_W")
f = "CONVERGE_V" in os.environ
"""
    assert len(list(env_reads(reads))) == 7
    writes = """
import os
os.environ["CONVERGE_X"] = "1"
os.environ.setdefault("PYSPARK_PYTHON", "python")
child = {**os.environ, "CONVERGE_BROKER": "b"}
path = os.environ.get("PYTHONPATH", "")
"""
    assert list(env_reads(writes)) == []


def test_every_variable_is_a_setting_and_read_with_its_default() -> None:
    fields = {f for f in Settings.__dataclass_fields__}
    assert set(ENV) <= fields
    assert all(var.startswith("CONVERGE_") for var in ENV.values())
    assert env_setting("loop", {}) == "uvloop"
    assert env_setting("checkpoints", {}) is None
    assert env_setting("gc", {ENV["gc"]: "off"}) == "off"
    with pytest.raises(TypeError):
        env_setting("nope", {})
