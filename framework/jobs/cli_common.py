"""What the coordinated jobs' commands share (``converge retention``, ``converge idmap``): the app
that declares the job, bookkeeping stores beside a SQLite wide store, the wide store itself."""

from __future__ import annotations

import argparse
import os
from typing import Any

from framework.cli_support import UserError, load_spec

__all__ = ["add_turn_flags", "app_declaring", "store_beside", "open_existing_store"]


def app_declaring(spec: str, attribute: str, example: str) -> Any:
    """The converge ``App`` named by ``--app``; UserError unless it declares ``attribute``
    (``example`` shows how, e.g. ``retention=RetentionPolicy(...)``)."""
    from framework.app import App

    app = load_spec(spec)
    if not isinstance(app, App):
        raise UserError(f"--app {spec}: not a converge App")
    if getattr(app, attribute) is None:
        raise UserError(f"--app {spec}: the app declares no {attribute} (App(..., {example}))")
    return app


def store_beside(store_url: str, name: str, flag: str, env: str | None) -> str:
    """``env``'s URL when set, else a SQLite file ``name`` beside a SQLite wide store; UserError
    naming ``flag`` when the store is not SQLite."""
    from stores.open import sqlite_path, sqlite_url

    if env and os.environ.get(env):
        return os.environ[env]
    if not store_url.startswith("sqlite:"):
        raise UserError(f"{flag}: give a URL (the store is not SQLite, nothing to put it beside)")
    return sqlite_url(sqlite_path(store_url).parent / name)


async def open_existing_store(url: str) -> Any:
    """Open the wide store; UserError when a SQLite store file does not exist (never create one)."""
    from stores.open import open_wide_store, sqlite_path

    if url.startswith("sqlite:") and not sqlite_path(url).exists():
        raise UserError(f"--wide-store: {sqlite_path(url)} does not exist")
    return await open_wide_store(url)


def add_turn_flags(parser: argparse.ArgumentParser, job: str) -> None:
    """The flags of one coordinated turn of ``job``: its lock URL, predecessor, first job of a new
    domain, and a fixed clock for tests (``--now``)."""
    parser.add_argument(
        "--locks", default=None, help="job lock URL (env CONVERGE_JOB_LOCKS; default: beside the store)"
    )
    parser.add_argument("--predecessor", default=None, help=f"the job whose turn comes right before {job}'s")
    parser.add_argument("--start-with", default=None, help="the job taking the first turn of a new domain")
    parser.add_argument("--now", type=float, default=None, help=argparse.SUPPRESS)
