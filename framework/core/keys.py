"""Natural keys: deterministic ids every pipeline can compute without a read."""

from __future__ import annotations

import functools
import hashlib
import uuid

__all__ = ["natural_key", "CONVERGE_NAMESPACE"]

#: Root namespace of converge's natural keys (uuid5 of the project's URL name).
CONVERGE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "converge:natural-key")


def natural_key(namespace: str, *fields: object) -> str:
    """A uuid5 string over ``namespace`` and the stable ``fields`` of an entity.

    The same inputs give the same key in every process and every run, so two
    pipelines that see the same entity write into the same row. Fields are
    joined unambiguously (length-prefixed), so ``("a:b",)`` and ``("a", "b")``
    differ. Keys of text and integer fields are cached (events repeat entities).
    """
    if type(namespace) is str and all(type(f) is str or type(f) is int for f in fields):
        return _cached_key(namespace, *fields)
    return _key(namespace, *fields)  # equal values of other types can differ in text (0.0, -0.0)


def _key(namespace: str, *fields: object) -> str:
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
    # uuid.uuid5 without the UUID object: SHA-1 of namespace and name, version 5, RFC 4122 variant
    name = _namespace(namespace).bytes + "|".join(parts).encode("utf-8")
    digest = bytearray(hashlib.sha1(name, usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


#: Only for ``str`` and ``int`` fields, whose equal values have equal texts.
_cached_key = functools.lru_cache(maxsize=16_384)(_key)


@functools.lru_cache(maxsize=1024)
def _namespace(name: str) -> uuid.UUID:
    """The uuid5 namespace of ``name`` under converge's root (apps use a handful)."""
    return uuid.uuid5(CONVERGE_NAMESPACE, name)
