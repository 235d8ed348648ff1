"""Keyed hashes of subjects: what the audit table and the deny-list keep instead of the value.

``subject_hash`` is HMAC-SHA256 over ``kind`` and the normalised value with
the erasure key, so the same subject always has the same hash (the deny-list
and the audit trail can be matched against a later request), while a reader
without the key cannot test guesses (an e-mail address is guessable; a plain
hash of it would not protect it). The key is the ``erasure_key`` setting
(``CONVERGE_ERASURE_KEY``, at least 16 bytes); there is no default key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Literal, overload

from framework.core.errors import ConvergeError
from framework.settings import ENV, env_setting

__all__ = ["ENV_KEY", "ErasureKeyError", "erasure_key", "subject_hash"]

#: Environment variable holding the erasure key.
ENV_KEY = ENV["erasure_key"]
_MIN_KEY_BYTES = 16


class ErasureKeyError(ConvergeError, ValueError):
    """No erasure key, or one too short to be a secret."""


@overload
def erasure_key(env: Mapping[str, str] | None = None, *, required: Literal[True] = True) -> bytes: ...


@overload
def erasure_key(env: Mapping[str, str] | None = None, *, required: bool) -> bytes | None: ...


def erasure_key(env: Mapping[str, str] | None = None, *, required: bool = True) -> bytes | None:
    """The erasure key from ``env`` (default ``os.environ``); ErasureKeyError when missing (and
    ``required``) or shorter than 16 bytes."""
    text = env_setting("erasure_key", env)
    if not text:
        if required:
            raise ErasureKeyError(f"set {ENV_KEY} to the erasure key (a secret of at least 16 bytes)")
        return None
    key = text.encode("utf-8")
    if len(key) < _MIN_KEY_BYTES:
        raise ErasureKeyError(f"{ENV_KEY} is shorter than {_MIN_KEY_BYTES} bytes")
    return key


def subject_hash(key: bytes, kind: str, value: str) -> str:
    """HMAC-SHA256 of ``kind`` and the normalised ``value`` under ``key``, as hex."""
    return hmac.new(key, f"{kind}\x00{value}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
