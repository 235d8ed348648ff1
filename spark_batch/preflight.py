"""What a batch job's driver resolves and checks before Spark starts.

``Job`` loads the app, picks its projections, resolves where to connect
(``framework.Settings``: flags, then ``CONVERGE_*``, then the app's
defaults) and checks the store's tables, the index aliases and the input
paths, each failure a one-line ``JobError``. On a cluster master, a store only the driver can reach
(a SQLite file) is refused unless its path is declared shared (``shared_store_refusal``).
"""

from __future__ import annotations

import argparse
import glob
import os
from collections.abc import Sequence
from pathlib import Path

from framework.core.projection import Projection
from framework.core.sync import run_sync
from framework.settings import Settings, Tombstones
from spark_batch.apps import JobError, load_app, one, require_tables, select
from spark_batch.io import open_index

__all__ = ["Job", "absolute_store_url", "input_bytes", "shared_store_refusal", "SHORT_INPUT_BYTES"]

#: A job whose inputs hold at most this many bytes is a short one (``spark_session(short=True)``):
#: about 190,000 hub rows of the reference platform in a SQLite store.
SHORT_INPUT_BYTES = 256 * 2**20


def absolute_store_url(url: str) -> str:
    """``url`` with a relative SQLite path made absolute (executors may run elsewhere)."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
    return url


def input_bytes(store_url: str | None, *paths: str | None) -> int | None:
    """Bytes of a job's inputs: the SQLite store's file (``store_url``) and the files under
    ``paths``; None when the store is not a SQLite file (e.g. Cassandra)."""
    from stores.open import sqlite_path

    total = 0
    if store_url is not None:
        try:
            path = sqlite_path(store_url)
        except ValueError:
            return None
        total += sum(
            Path(f"{path}{suffix}").stat().st_size
            for suffix in ("", "-wal")
            if Path(f"{path}{suffix}").exists()
        )
    for p in filter(None, paths):
        for match in glob.glob(p):
            root = Path(match)
            total += sum(
                f.stat().st_size for f in (root.rglob("*") if root.is_dir() else [root]) if f.is_file()
            )
    return total


def shared_store_refusal(
    master: str, store_url: str, shared_paths: str | None = None, *, shared: bool = False
) -> str | None:
    """Why a job on ``master`` cannot write ``store_url``, or None: on a master that is not local, a
    SQLite file is reached by the executors only when ``shared`` (``--shared-store``) or under one of
    ``shared_paths`` (``os.pathsep``-separated directories every executor sees at the same path)."""
    from spark_batch.session import is_local
    from stores.open import sqlite_path

    if is_local(master) or shared:
        return None
    try:
        path = Path(sqlite_path(store_url)).resolve()
    except ValueError:
        return None  # a networked store (Cassandra): every executor reaches it
    for root in filter(None, (shared_paths or "").split(os.pathsep)):
        if path.is_relative_to(Path(root).resolve()):
            return None
    return (
        f"the store {store_url} is a file only this machine reaches, and master {master} runs executors "
        "elsewhere: give a store every executor reaches (--wide-store cassandra://HOST/KEYSPACE), or "
        "declare the path shared (--shared-store, or CONVERGE_SHARED_PATHS=DIR) if every executor sees it"
    )


class Job:
    """The app, projections and settings of one job, from its command-line ``args``.

    ``need_projection``: the job works on projections (all, or ``--projection``);
    ``single``: exactly one (``--projection`` required when the app has several).
    """

    def __init__(self, args: argparse.Namespace, *, need_projection: bool, single: bool = False) -> None:
        self.args = args
        self.app = load_app(args.app)
        self.projections: tuple[Projection, ...] = ()
        if single:
            self.projections = (one(self.app, args.projection),)
        elif need_projection:
            self.projections = select(self.app, args.projection)
        if args.alias is not None and len(self.projections) != 1:
            raise JobError("--alias names the index of one projection: choose it with --projection")
        try:
            self.settings = Settings.resolve(
                self.app.name,
                wide_store=args.store,
                data_dir=getattr(args, "data_dir", None),
                es_url=args.es_url,
                es_tombstones=args.tombstones,
                dlq_root=getattr(args, "dlq_root", None),
            )
        except ValueError as exc:
            raise JobError(str(exc)) from None
        self.store = absolute_store_url(self.settings.wide_store)
        from spark_batch.session import default_master

        master = getattr(args, "master", None) or default_master()
        refusal = shared_store_refusal(
            master, self.store, self.settings.shared_paths, shared=getattr(args, "shared_store", False)
        )
        if refusal is not None:
            raise JobError(refusal)

    @property
    def tombstones(self) -> Tombstones:
        return self.settings.es_tombstones

    def es_url(self) -> str:
        if not self.settings.es_url:
            raise JobError("no index: give --es-url (or set CONVERGE_ES_URL)")
        return self.settings.es_url

    def alias(self, projection: Projection) -> str:
        """``--alias``, else the projection's own."""
        return str(self.args.alias or projection.alias)

    def require_tables(self) -> None:
        """The store holds every table of the projections."""
        run_sync(require_tables(self.store, self.projections))

    def require_aliases(self) -> None:
        """The index serves the alias of every projection."""
        run_sync(_require_aliases(self.es_url(), self.tombstones, [self.alias(p) for p in self.projections]))

    def require_inputs(self, paths: Sequence[str]) -> None:
        """Every local input path (no ``scheme://``) matches a file or directory."""
        for path in paths:
            if "://" not in path and not glob.glob(path):
                raise JobError(f"no input matches {path}")


async def _require_aliases(es_url: str, tombstones: Tombstones, aliases: Sequence[str]) -> None:
    index = open_index(es_url, tombstones)
    try:
        for alias in aliases:
            if not await index.alias_indices(alias) and not await index.client.indices.exists(index=alias):
                raise JobError(f"index alias {alias!r} does not exist at {es_url}")
    finally:
        await index.close()
