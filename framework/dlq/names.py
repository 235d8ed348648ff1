"""Safe directory names for partition labels taken from event data.

A label is kept as is when it is made only of ``[A-Za-z0-9._-]``, does not start
with a dot and is at most ``MAX_COMPONENT`` characters. Any other label is
rewritten (unsafe characters become ``_``, leading dots are dropped, the result
is cut to length) and gets ``~`` plus a hash of the original label, so two
distinct labels never share a directory. ``~`` never occurs in a kept label.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from framework.core.errors import ConvergeError
from framework.dlq.record import Partition

__all__ = ["MAX_COMPONENT", "sanitise", "partition_dir", "label", "UnsafePathError"]

MAX_COMPONENT = 64
_HASH_CHARS = 10
_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9._-]")


class UnsafePathError(ConvergeError, ValueError):
    """A computed path would leave the WAL directory."""


def label(text: str) -> str:
    """``text`` made storable as SQLite/UTF-8 text (lone surrogates escaped)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def sanitise(text: str) -> str:
    """A single safe path component for ``text``, distinct for distinct inputs."""
    if len(text) <= MAX_COMPONENT and _SAFE.fullmatch(text) and not text.startswith("."):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    body = _UNSAFE_CHAR.sub("_", text).lstrip(".")[: MAX_COMPONENT - _HASH_CHARS - 1]
    return f"{body}~{digest}"


def partition_dir(segments_root: Path, part: Partition) -> Path:
    """``segments_root/pipeline/event_type/stage/error_class``, each part sanitised and checked."""
    root = segments_root.resolve()
    path = root.joinpath(*(sanitise(p) for p in part))
    resolved = path.resolve()
    if resolved.parent.parent.parent.parent != root:
        raise UnsafePathError(f"partition {part!r} maps outside {root}")
    return path
