"""converge's pytest plugin (entry point ``pytest11``): fixtures for app teams' tests.

- ``converge_driver``: a factory ``converge_driver(app, **kwargs) -> Driver``; every
  driver it made is closed after the test.
- ``converge_stack``: one embedded noida-db (Kafka + Elasticsearch) for the whole
  session (``framework.local_stack.LocalStack``), as its ``StackInfo``; noida-db comes
  with the ``stack`` extra.
- ``converge_s3``: one embedded S3 server (moto's server mode) for the whole session
  (``framework.local_s3.LocalS3``), as its endpoint URL; moto comes with the ``stack`` extra.

The names start with ``converge_`` so they never clash with a project's own fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from framework.app import App
    from framework.local_stack import StackInfo
    from framework.testing.driver import Driver


@pytest.fixture(scope="session")
def converge_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    """One noida-db for the session; stopped (SIGINT) at its end."""
    from framework.local_stack import LocalStack

    stack = LocalStack(tmp_path_factory.mktemp("converge-stack"))
    info = stack.start()
    try:
        yield info
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def converge_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One embedded S3 server for the session, as its endpoint (``http://127.0.0.1:PORT``)."""
    from framework.local_s3 import LocalS3

    with LocalS3(tmp_path_factory.mktemp("converge-s3")) as s3:
        yield s3.endpoint


@pytest.fixture()
def converge_driver() -> Iterator[Callable[..., Driver]]:
    """A factory of in-memory drivers (``Driver(app, **kwargs)``), closed after the test."""
    from framework.testing.driver import Driver

    made: list[Driver] = []

    def make(app: App, **kwargs: Any) -> Driver:
        driver = Driver(app, **kwargs)
        made.append(driver)
        return driver

    yield make
    for driver in made:
        driver.close()
