"""The erasure key every erasure test runs with."""

from __future__ import annotations

import pytest

from framework.erasure.keyed import ENV_KEY

#: A test key (a real one is a secret of at least 16 bytes).
KEY = "erasure-test-key-0123456789abcdef"


@pytest.fixture(autouse=True)
def erasure_key(monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setenv(ENV_KEY, KEY)
    return KEY.encode()
