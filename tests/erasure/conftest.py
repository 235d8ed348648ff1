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


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    """``local[2]`` for the backfill test (started only when a test asks for it)."""
    from spark_batch.session import spark_session

    session = spark_session(
        "converge-erasure-tests", "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )  # fmt: skip
    yield session
    session.stop()
