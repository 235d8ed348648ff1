"""Natural keys: deterministic ids every pipeline can compute without a read."""

from __future__ import annotations

import functools
import uuid

__all__ = ["natural_key", "CONVERGE_NAMESPACE"]

#: Root namespace of converge's natural keys (uuid5 of the project's URL name).
CONVERGE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "converge:natural-key")


def natural_key(namespace: str, *fields: object) -> str:
    """A uuid5 string over ``namespace`` and the stable ``fields`` of an entity.

    The same inputs give the same key in every process and every run, so two
    pipelines that see the same entity write into the same row. Fields are
    joined unambiguously (length-prefixed), so ``("a:b",)`` and ``("a", "b")``
    differ.
    """
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("natural_key: namespace must be a non-empty string")
    if not fields:
        raise ValueError("natural_key: at least one stable field is required")
    parts = []
    for f in fields:
        if f is None:
            raise ValueError("natural_key: fields cannot be None")
        text = str(f)
        parts.append(f"{len(text)}:{text}")
    return str(uuid.uuid5(_namespace(namespace), "|".join(parts)))


@functools.lru_cache(maxsize=1024)
def _namespace(name: str) -> uuid.UUID:
    """The uuid5 namespace of ``name`` under converge's root (apps use a handful)."""
    return uuid.uuid5(CONVERGE_NAMESPACE, name)
