"""A worker's runtime status in a JSON file: dumped by test apps, read by the tests that spawn them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faust

__all__ = ["dump_status", "read_status"]


def dump_status(app: faust.App, path: Path, status: Callable[[], dict[str, Any]], every: float = 0.2) -> None:
    """Write ``{"pid": <worker pid>, **status()}`` to ``path`` every ``every`` seconds (atomic replace)."""

    @app.timer(every, name="tests.dump_status")
    async def dump() -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), **status()}, default=str))
        tmp.replace(path)


def read_status(path: Path, pid: int | None = None) -> dict[str, Any]:
    """The last status dumped to ``path`` (by worker ``pid`` when given); {} when there is none yet."""
    try:
        status = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    if pid is not None and status.get("pid") != pid:
        return {}
    return status
