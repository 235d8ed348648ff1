"""mkdocs hook: the reference pages generated from the code at build time.

- ``reference/cli.md``: the help of every command and subcommand, from the parser that
  ``framework.cli.build_parser()`` returns (built-in commands and ``converge.commands`` plugins).
- ``reference/settings.md``: the fields of ``framework.settings.Settings``, each with its
  environment variable (``framework.settings.ENV``) and the default its docstring states.
- ``reference/api/*.md``: one mkdocstrings directive per name that ``framework``,
  ``framework.state``, ``framework.testing`` and ``framework.erasure`` export, resolved to its
  defining module (a constant: to the package that exports it).
- ``reference/layout.md``: the layers ``tests/test_layers.py`` checks, then the packages and
  public modules of the tree, each with the first paragraph of its docstring.
- ``benchmarks.md``: the repository's BENCHMARKS.md.

Every page's ``converge ...`` commands in code (spans and blocks) are checked against the same
parser: the command path must exist and each ``--flag`` must be one of its options; and every
``CONVERGE_*`` variable a page names must occur in the code. The tutorial must hold the
README's "try an app" commands as they are (``tests/test_readme.py`` runs the README's).

Anything that does not match (a plugin that failed to load, a setting without a description,
an unknown command or flag on a page) is logged as a warning, which ``mkdocs build --strict``
turns into a failure.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.converge")
ROOT = Path(__file__).resolve().parents[1]
HELP_WIDTH = "100"

#: API pages: (page, title, public packages whose ``__all__`` it documents, plain modules).
TUTORIAL = "tutorial/first-app.md"
#: Top-level packages of the layout page, from the ground up.
LAYOUT = ("framework", "stores", "spark_batch", "agents", "examples")
API_PAGES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("framework", "The app API (framework)", ("framework",), ()),
    ("state", "Lookups and joins (framework.state)", ("framework.state",), ()),
    ("testing", "The test kit (framework.testing)", ("framework.testing",), ()),
    ("erasure", "Erasure (framework.erasure)", ("framework.erasure",), ()),
    (
        "stores",
        "Stores",
        (),
        ("stores.base", "stores.open", "stores.errors", "stores.objects.store", "stores.objects.error_map"),
    ),
)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the site."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    pages = {
        "reference/cli.md": cli_page(),
        "reference/settings.md": settings_page(),
        "reference/layout.md": layout_page(),
        "benchmarks.md": (ROOT / "BENCHMARKS.md").read_text(),
    }
    for name, title, packages, modules in API_PAGES:
        pages[f"reference/api/{name}.md"] = api_page(title, packages, modules)
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    return files


# -- the command line ------------------------------------------------------------------------


def cli_page() -> str:
    """Every command's ``--help``, in registration order, one section per (sub)command."""
    from importlib.metadata import entry_points

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH  # argparse wraps help at the terminal width
    try:
        cli = importlib.import_module("framework.cli")
        parser = cli.build_parser()
        sections = list(_commands(parser, 1))
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    names = {prog.split()[1] for prog, _, _ in sections if len(prog.split()) > 1}
    for ep in entry_points(group="converge.commands"):
        if ep.name not in names:
            log.warning("reference/cli.md: plugin command %r (%s) is not in the parser", ep.name, ep.value)
    out = [
        "# Command line",
        "",
        "Generated from `framework.cli.build_parser()` when the site is built: the help of every",
        "command, built-in or registered as a `converge.commands` entry point. Every command also",
        "answers `--help` itself.",
        "",
    ]
    for prog, depth, text in sections:
        out += [f"{'#' * min(depth + 1, 6)} `{prog}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)


def _commands(parser: argparse.ArgumentParser, depth: int) -> Iterator[tuple[str, int, str]]:
    yield parser.prog, depth, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for child in action.choices.values():
                if id(child) not in seen:  # aliases share one parser
                    seen.add(id(child))
                    yield from _commands(child, depth + 1)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Warn about each ``converge`` command in the page's code that the parser does not know."""
    if page.file.src_uri != "reference/cli.md":
        for problem in command_problems(markdown) + variable_problems(markdown):
            log.warning("%s: %s", page.file.src_uri, problem)
    if page.file.src_uri == TUTORIAL and readme_block("try-an-app") not in markdown:
        log.warning("%s: the README's try-an-app commands are not in it as they are", TUTORIAL)
    return markdown


def readme_block(name: str) -> str:
    """The ``sh`` block between ``<!-- name -->`` and ``<!-- /name -->`` in the README."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {name} -->\n(```sh\n.*?```)\n<!-- /{name} -->", text, re.S)
    if match is None:
        log.warning("README.md: no %s block", name)
        return ""
    return match.group(1)


_CODE_TEXT: list[str] = []


def variable_problems(markdown: str) -> list[str]:
    """The ``CONVERGE_*`` names in ``markdown`` that no Python file of the project contains."""
    if not _CODE_TEXT:
        paths = [p for top in (*LAYOUT, "tests", "benchmarks") for p in (ROOT / top).rglob("*.py")]
        _CODE_TEXT.append("\n".join(p.read_text() for p in paths))
    names = sorted(set(re.findall(r"CONVERGE_[A-Z][A-Z0-9_]*", markdown)))
    return [f"{name}: no Python file of the project names it" for name in names if name not in _CODE_TEXT[0]]


_PARSER: list[argparse.ArgumentParser] = []
_IN_CODE = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"(?:^|[\s($\"'`])converge((?: +[^\s#|;&)`\"']+)*)")


def command_problems(markdown: str) -> list[str]:
    """What is wrong with the ``converge`` commands in ``markdown``'s code spans and blocks."""
    if not _PARSER:
        _PARSER.append(importlib.import_module("framework.cli").build_parser())
    problems = []
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        code = [line.split(" #")[0]] if fenced else _IN_CODE.findall(line)
        for text in code:
            for match in _COMMAND.finditer(text):
                problem = _check(_PARSER[0], match.group(1).split())
                if problem:
                    problems.append(f"`converge{match.group(1)}`: {problem}")
    return problems


def _check(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    chain = [parser]
    for i, word in enumerate(words):
        sub = _subcommands(chain[-1])
        if word.startswith("-") or not sub:
            break
        if word in sub:
            chain.append(sub[word])
        elif i == 0 and re.fullmatch(r"[a-z]+", word):
            return f"no command {word!r}"
        else:
            break
    known = {opt for p in chain for a in p._actions for opt in a.option_strings}
    for word in words:
        for flag in re.findall(r"(?:^|[\[/|])(--[a-z][a-z0-9-]*)", word):
            if flag not in known:
                return f"{' '.join(p.prog for p in chain[-1:])} has no option {flag}"
    return None


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# -- settings --------------------------------------------------------------------------------


def settings_page() -> str:
    """A table of ``Settings``' fields: name, environment variable, type, default and meaning."""
    settings = importlib.import_module("framework.settings")
    cls = settings.Settings
    env: dict[str, str] = dict(getattr(settings, "ENV", {}))
    doc = _described(cls.__doc__ or "")
    intro = (cls.__doc__ or "").strip().split("\n\n")
    out = [
        "# Settings",
        "",
        "Generated from `framework.settings.Settings` when the site is built.",
        "",
        _dedent(intro[0]),
        "",
    ]
    if len(intro) > 1 and not intro[1].lstrip().startswith("-"):
        out += [_dedent(intro[1]), ""]
    out += ["| setting | environment | type | default and meaning |", "|---|---|---|---|"]
    for field in dataclasses.fields(cls):
        var = env.get(field.name) or field.metadata.get("env")
        text = field.metadata.get("doc") or doc.get(field.name)
        if not text and field.name != "app_id":
            log.warning("reference/settings.md: Settings.%s has no description in its docstring", field.name)
        if field.name == "app_id" and not text:
            text = "the consumer group and the default data dir's name; default: the app's name"
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        out.append(
            f"| `{field.name}` | {f'`{var}`' if var else '-'} | `{_cell(kind)}` | {_cell(text or '')} |"
        )
    return "\n".join(out) + "\n"


def _described(doc: str) -> dict[str, str]:
    """``- ``name``: text`` items of a docstring (continuation lines joined)."""
    items: dict[str, str] = {}
    current: str | None = None
    for line in doc.splitlines():
        m = re.match(r"\s*- ``(\w+)``:\s*(.*)", line)
        if m:
            current = m.group(1)
            items[current] = m.group(2).strip()
        elif current and line.strip() and not line.strip().startswith("-"):
            items[current] += " " + line.strip()
        else:
            current = None
    return items


def _dedent(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines()).replace("``", "`")


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|")


# -- the public API --------------------------------------------------------------------------


def api_page(title: str, packages: tuple[str, ...], modules: tuple[str, ...]) -> str:
    """mkdocstrings directives for each exported name at its defining module, then ``modules``."""
    out = [f"# {title}", "", "Generated from the packages' `__all__` when the site is built.", ""]
    for package in packages:
        for name, where in _exports(package):
            out += [f"::: {where}.{name}", "    options:", "      heading_level: 2", ""]
    for module in modules:
        out += [f"::: {module}", "    options:", "      heading_level: 2", ""]
    return "\n".join(out)


def _exports(package: str) -> Iterator[tuple[str, str]]:
    """``(name, defining module)`` of each name in ``package.__all__``."""
    module = importlib.import_module(package)
    where: dict[str, str] = getattr(module, "_WHERE", {})  # lazily loaded names say where they live
    for name in module.__all__:
        home = where.get(name)
        if home is None:
            obj: Any = getattr(module, name)
            defined = isinstance(obj, type) or callable(obj)  # a constant's __module__ is its type's
            home = getattr(obj, "__module__", package) if defined else package
        yield name, home


# -- layout ----------------------------------------------------------------------------------


def layout_page() -> str:
    """One table per top-level package: its subpackages and public modules, each with its summary."""
    out = [
        "# Layout",
        "",
        "Generated from the source tree when the site is built: every package and module of the",
        "project's top-level packages (private `_` modules left out), with the first paragraph of",
        "its docstring, after the layers that `tests/test_layers.py` checks.",
        "",
    ]
    out += [
        "## Layers",
        "",
        "From the ground up (`LAYERS` in `tests/test_layers.py`): a module imports only its own",
        "layer and those below, counting imports made for type checking only, and no import circle.",
        "",
    ]
    out += [f"{i}. " + ", ".join(f"`{name}`" for name in layer) for i, layer in enumerate(layers(), 1)]
    out.append("")
    for top in LAYOUT:
        out += [f"## `{top}`", "", "| module | what |", "|---|---|"]
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "__pycache__" in rel.parts or (path.name.startswith("_") and path.name != "__init__.py"):
                continue
            name = ".".join(rel.with_suffix("").parts)
            name = name.removesuffix(".__init__")
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            first = doc.strip().split("\n\n")[0].replace("\n", " ")
            out.append(f"| `{name}` | {_cell(first)} |")
        out.append("")
    return "\n".join(out)


def layers() -> list[tuple[str, ...]]:
    """``LAYERS`` of ``tests/test_layers.py``, read from its source (the test is not imported)."""
    tree = ast.parse((ROOT / "tests" / "test_layers.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if node.target.id == "LAYERS":
                return list(ast.literal_eval(node.value))
    log.warning("reference/layout.md: tests/test_layers.py has no LAYERS")
    return []
