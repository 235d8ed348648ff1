"""The one parser of coordination URLs, for checkpoint stores and lock domains alike.

``sqlite:///PATH`` names a SQLite file by ``stores.open.sqlite_path``'s rule
(``sqlite:///relative``, ``sqlite:////absolute``); ``zookeeper://H1:P1,H2:P2/ROOT``
names an ensemble and a root znode (optional: each contract has its default).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from framework.coordination.checkpoints import CheckpointError
from framework.coordination.locks import JobLockError
from stores.open import sqlite_path

__all__ = ["CoordinationUrl", "CoordinationUrlError", "parse_coordination_url"]


class CoordinationUrlError(CheckpointError, JobLockError):
    """A coordination URL is malformed or names no known backend.

    It is a CheckpointError and a JobLockError, so callers of either opener catch it as they
    catch the contract's own errors.
    """

    def __init__(self, what: str, url: str, problem: str) -> None:
        super().__init__(f"{what} URL {url!r}: {problem}")
        self.url = url


@dataclass(frozen=True, slots=True)
class CoordinationUrl:
    """A parsed URL: ``sqlite`` with its ``path``, or ``zookeeper`` with its ``hosts`` and
    ``root`` (``/ROOT``; None when the URL names none)."""

    scheme: str
    path: Path | None = None
    hosts: str = ""
    root: str | None = None


def parse_coordination_url(url: str, what: str) -> CoordinationUrl:
    """The backend ``url`` names; CoordinationUrlError (its message starts ``{what} URL``) otherwise."""
    scheme, sep, rest = url.partition("://")
    if not sep or not rest:
        raise CoordinationUrlError(what, url, "expected sqlite:///PATH or zookeeper://HOSTS/ROOT")
    if scheme == "sqlite":
        try:
            return CoordinationUrl("sqlite", path=sqlite_path(url))
        except ValueError:
            raise CoordinationUrlError(
                what, url, "expected sqlite:///relative/path or sqlite:////absolute/path"
            ) from None
    if scheme == "zookeeper":
        hosts, slash, root = rest.partition("/")
        if not hosts:
            raise CoordinationUrlError(what, url, "no ZooKeeper hosts")
        return CoordinationUrl("zookeeper", hosts=hosts, root=f"/{root}" if slash and root else None)
    raise CoordinationUrlError(what, url, f"unknown scheme {scheme!r} (sqlite or zookeeper)")
