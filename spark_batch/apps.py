"""The app a batch job runs: loaded from ``MODULE:ATTR``, its projections chosen, its tables checked.

Executors receive the spec string, never the app object, and load it
themselves (``app_of``), once per Python worker process. The driver
validates everything it can first (``load_app``, ``select``, ``one``,
``require_tables``) so a wrong app, projection or store fails with one
``JobError`` line before any Spark job starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from framework.app import App
from framework.core.errors import ConvergeError
from framework.core.projection import Projection
from framework.core.schema import SchemaError, TableSchema
from framework.worker.loading import load_converge_app
from stores.open import open_wide_store

__all__ = ["JobError", "app_of", "load_app", "projection_of", "select", "one", "tables_of", "require_tables"]

_CACHE: dict[str, App] = {}


class JobError(ConvergeError, ValueError):
    """A job was given something it cannot run with; the message is one line for the user."""


def app_of(spec: str) -> App:
    """The converge ``App`` named ``MODULE:ATTR``, loaded once per process (executors call this)."""
    app = _CACHE.get(spec)
    if app is None:
        app = _CACHE[spec] = load_converge_app(spec)
    return app


def load_app(spec: str) -> App:
    """``app_of(spec)`` on the driver: any failure to import or build it is a ``JobError``."""
    if not isinstance(spec, str) or not spec:
        raise JobError("no app: give --app MODULE:ATTR (a converge App)")
    try:
        return app_of(spec)
    except Exception as exc:  # noqa: BLE001 - importing user code may raise anything
        raise JobError(f"cannot load app {spec!r}: {type(exc).__name__}: {_line(exc)}") from None


def projection_of(spec: str, name: str) -> Projection:
    """The projection ``name`` of the app ``spec`` (executor side)."""
    return app_of(spec).projection(name)


def select(app: App, name: str | None = None) -> tuple[Projection, ...]:
    """The projection called ``name`` (name or alias), or every projection of ``app`` when None."""
    if not app.projections:
        raise JobError(f"app {app.name!r} declares no projection")
    if name is None:
        return app.projections
    try:
        return (app.projection(name),)
    except KeyError:
        known = ", ".join(p.name for p in app.projections)
        raise JobError(f"app {app.name!r} has no projection {name!r} (projections: {known})") from None


def one(app: App, name: str | None = None) -> Projection:
    """The one projection a job works on: ``name``, or the app's only projection."""
    chosen = select(app, name)
    if len(chosen) > 1:
        known = ", ".join(p.name for p in chosen)
        raise JobError(f"app {app.name!r} has several projections ({known}): choose one with --projection")
    return chosen[0]


def tables_of(projection: Projection) -> tuple[TableSchema, ...]:
    """The tables a projection's documents are computed from: its source tables, then its version table."""
    return (*projection.tables, projection.version_table)


async def require_tables(store_url: str, projections: Sequence[Projection]) -> None:
    """``JobError`` unless the store declares every table of ``projections``, partitioned as declared."""
    if store_url.startswith("sqlite://"):
        path = Path(store_url.removeprefix("sqlite://").removeprefix("/"))
        if not path.is_file():
            raise JobError(f"no store at {store_url} (no such file)")
    store = await open_wide_store(store_url)
    try:
        for p in projections:
            for declared in tables_of(p):
                try:
                    found = store.schema(declared.name)
                except SchemaError:
                    raise JobError(
                        f"store {store_url} has no table {declared.name!r} (projection {p.name}): "
                        "run the app or a backfill into it first"
                    ) from None
                if found.partition_key != declared.partition_key:
                    raise JobError(
                        f"store {store_url}: table {declared.name!r} is partitioned by "
                        f"{[c.name for c in found.partition_key]}, projection {p.name} expects "
                        f"{[c.name for c in declared.partition_key]}"
                    )
    finally:
        await store.close()


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
