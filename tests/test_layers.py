"""The import graph follows the layer order: no module imports a higher layer, and no cycles.

Every ``import`` statement counts: one inside a function (a lazy import is
still a dependency) and one under ``if TYPE_CHECKING:`` (a type the module
is written against is a dependency too). ``LAYERS`` names every package and
loose module of the project, so a new one fails until it is given a layer.
``framework/__init__.py`` is the public API facade, above the declarations it
exports and below the apps.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("framework", "stores", "spark_batch", "agents", "examples")

#: Layers from the ground up; a module's layer is that of its longest matching prefix (a
#: module, or a package with everything under it). ``framework`` alone is the facade.
LAYERS: list[tuple[str, ...]] = [
    ("framework.core",),  # the ground model, with the protocol features read an app through
    ("stores",),
    # infrastructure
    (
        "framework.settings",
        "framework.kafka_admin",
        "framework.publishing",
        "framework.local_process",
        "framework.local_stack",
        "framework.local_s3",
    ),
    ("framework.runtime", "framework.dlq", "framework.coordination"),
    ("framework.state",),
    ("framework.delivery", "framework.notifications", "framework.metrics"),  # services
    ("framework.jobs",),
    ("framework.aggregates",),  # totals maintained from the change feed (a lifecycle feature's base)
    ("framework.verify",),  # every change verified store-against-index (reads notifications)
    # lifecycle features: erasure and ID mutation read each other's records (the deny-list, the
    # route records) and share a layer; retention knows every framework table
    ("framework.erasure", "framework.idmutation"),
    ("framework.retention",),
    ("framework.app",),  # the declaration
    ("framework.worker",),  # the worker's assembly and process
    ("framework.testing",),
    ("framework",),  # the public API facade
    ("spark_batch",),
    ("framework.cli",),  # the command line, the top: its ``spark`` command runs the batch layer
    ("agents", "examples"),
]

#: Entries that name one module only, not the modules under it.
EXACT = {"framework"}


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or (prefix not in EXACT and module.startswith(prefix + "."))


def layer_of(module: str) -> int:
    best, level = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if _matches(module, p) and len(p) > best:
                best, level = len(p), i
    if level < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return level


def modules() -> Iterator[tuple[str, Path]]:
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def imports_of(module: str, path: Path) -> set[str]:
    """Project modules ``path`` imports (resolving relative imports), by dotted name."""
    out: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in PACKAGES)
    return out


def known(name: str, graph: dict[str, set[str]]) -> str | None:
    """``name`` if it is a project module, else its module (``pkg.mod.attr`` -> ``pkg.mod``)."""
    while name and name not in graph:
        name = name.rpartition(".")[0]
    return name or None


def project_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m, _ in modules()}
    for module, path in modules():
        for name in imports_of(module, path):
            target = known(name, graph)
            if target is not None and target != module:
                graph[module].add(target)
    return graph


GRAPH = project_graph()


def test_every_module_has_a_layer() -> None:
    for module in GRAPH:
        layer_of(module)


def test_every_layer_entry_names_a_module() -> None:
    """No stale entry: each names a module or package of the tree."""
    stale = [p for layer in LAYERS for p in layer if p not in GRAPH]
    assert not stale, f"LAYERS names what the tree does not have: {stale}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_of_a_higher_layer(module: str) -> None:
    mine = layer_of(module)
    higher = sorted(t for t in GRAPH[module] if layer_of(t) > mine)
    assert not higher, f"{module} (layer {mine}) imports higher layers: {higher}"


def test_the_core_imports_nothing_outside_it() -> None:
    for module, targets in GRAPH.items():
        if module.startswith("framework.core"):
            outside = {t for t in targets if not t.startswith("framework.core")}
            assert not outside, f"{module} imports {sorted(outside)}"


def test_no_cycles() -> None:
    """Cycles between modules, ignoring package ``__init__`` re-exports of their own submodules."""
    edges = {
        m: {t for t in ts if not (t.startswith(m + ".") or m.startswith(t + "."))} for m, ts in GRAPH.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The graph is not blind: a lazy import inside a function and one for type checking only are found."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import spark_batch\n"
        "def f():\n    from agents.projection import ActivityProjection\n"
    )
    found = imports_of("stores.bad", bad)
    assert "agents.projection.ActivityProjection" in found and "spark_batch" in found
    assert layer_of("agents.projection") > layer_of("stores.bad")


def test_the_public_api_names_resolve() -> None:
    import framework

    for name in framework.__all__:
        assert getattr(framework, name) is not None, name
    assert len(framework.__all__) <= 24  # 20, the three names of aggregates (issue 26), publish (issue 43)
