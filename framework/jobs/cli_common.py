"""What the coordinated jobs' commands share (``converge retention``, ``converge idmap``): the app
that declares the job, bookkeeping stores beside a SQLite wide store, the wide store itself."""

from __future__ import annotations

import os
from typing import Any

from framework.cli_support import UserError, load_spec

__all__ = ["app_declaring", "store_beside", "open_existing_store"]


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
