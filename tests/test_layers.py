"""The import graph follows the layer order: no module imports a higher layer, and no cycles.

Every ``import`` statement counts: one inside a function (a lazy import is
still a dependency) and one under ``if TYPE_CHECKING:`` (a type the module
is written against is a dependency too). ``LAYERS`` names every package and
loose module of the project, so a new one fails until it is given a layer.
``framework/__init__.py`` is the public API facade, above the declarations it
exports and below the apps; the benchmarks and scripts stand above everything.

Two entries of one layer may import each other's modules one way only: the
graph of the entries has no cycle either (an arrow back up between packages
that share a layer fails as one between layers does).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("framework", "stores", "spark_batch", "agents", "examples", "benchmarks", "scripts")

#: Layers from the ground up; a module's layer is that of its longest matching prefix (a
#: module, or a package with everything under it). ``framework`` alone is the facade.
LAYERS: list[tuple[str, ...]] = [
    ("framework.core",),  # the ground model, with the protocol features read an app through
    (
        "framework.decoders",
    ),  # a Kafka record in, an event out: the runtime and the batch layer parse with them
    ("stores",),
    # infrastructure
    (
        "framework.settings",
        "framework.kafka_admin",
        "framework.publishing",
        "framework.local_process",
        "framework.local_stack",
        "framework.local_s3",
        "framework.local_spark",
        "framework.local_registry",
    ),
    ("framework.runtime", "framework.dlq", "framework.coordination"),
    ("framework.state",),
    ("framework.delivery", "framework.notifications", "framework.metrics"),  # services
    ("framework.jobs",),
    ("framework.aggregates",),  # totals maintained from the change feed (a lifecycle feature's base)
    ("framework.verify",),  # every change verified store-against-index (reads notifications)
    # lifecycle features: ID mutation routes the records of moved cells; the erasure screens and
    # deletes those records (its caller hands ID mutation the screen's verdict); retention knows
    # every framework table
    ("framework.idmutation",),
    ("framework.erasure",),
    ("framework.retention",),
    ("framework.app",),  # the declaration
    ("framework.worker",),  # the worker's assembly and process
    ("framework.testing",),
    ("framework",),  # the public API facade
    ("spark_batch",),
    ("framework.cli",),  # the command line, the top: its ``spark`` command runs the batch layer
    ("agents", "examples"),
    ("benchmarks", "scripts"),  # measurements and reproductions: on the apps and everything below
]

#: Entries that name one module only, not the modules under it.
EXACT = {"framework"}


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or (prefix not in EXACT and module.startswith(prefix + "."))


def _entry(module: str) -> tuple[str, int]:
    """The ``LAYERS`` entry ``module`` belongs to (its longest matching prefix) and its layer."""
    best, level = "", -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if _matches(module, p) and len(p) > len(best):
                best, level = p, i
    if level < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best, level


def layer_of(module: str) -> int:
    return _entry(module)[1]


def entry_of(module: str) -> str:
    return _entry(module)[0]


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
    """No stale entry: each names a module or package of the tree (``scripts`` is a namespace
    package: a folder of modules without ``__init__.py``)."""
    stale = [
        p
        for layer in LAYERS
        for p in layer
        if p not in GRAPH and not any(m.startswith(p + ".") for m in GRAPH)
    ]
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


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``edges`` (its nodes, the first repeated at the end), else None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def entry_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between ``LAYERS`` entries (packages and loose modules): one edge for every
    module of one entry that imports a module of another."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = entry_of(module)
        out.setdefault(mine, set()).update(t for t in map(entry_of, targets) if t != mine)
    return out


def test_no_cycles() -> None:
    """Cycles between modules, ignoring package ``__init__`` re-exports of their own submodules."""
    edges = {
        m: {t for t in ts if not (t.startswith(m + ".") or m.startswith(t + "."))} for m, ts in GRAPH.items()
    }
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_no_cycles_between_packages() -> None:
    """No arrow back up between the entries of one layer either: if two packages that share a
    layer import each other (through different modules), one of them belongs higher."""
    cycle = find_cycle(entry_graph(GRAPH))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or ())


def test_the_checker_sees_a_cycle_between_packages_of_one_layer() -> None:
    """Modules without a cycle between them can still tie two packages in a loop (ID mutation's
    steps imported the erasure screen, which imports ID mutation's routes)."""
    graph = {
        "framework.idmutation.steps": {"framework.erasure.screen"},
        "framework.erasure.screen": {"framework.idmutation.routes"},
        "framework.idmutation.routes": set(),
    }
    assert find_cycle(graph) is None
    loop = ["framework.erasure", "framework.idmutation", "framework.erasure"]
    assert find_cycle(entry_graph(graph)) == loop


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
    assert len(framework.__all__) <= 23  # 20, and the three names of aggregates (issue 26)
