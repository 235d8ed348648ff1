"""``AppModel``: what the framework's features, jobs and stores read of an app's declarations.

Features type against it (or a protocol of their own that adds their declaration,
e.g. the retention policy), never against ``framework.app.App``, which sits
above them and declares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from framework.core.projection import Projection
from framework.core.schema import TableSchema

__all__ = ["AgentModel", "AppModel"]


class AgentModel(Protocol):
    """An agent as the framework sees it from outside: where it reads, what it writes."""

    @property
    def name(self) -> str: ...

    @property
    def topic(self) -> str: ...

    @property
    def tables(self) -> Sequence[TableSchema]: ...

    @property
    def event_types(self) -> Sequence[str]: ...


class AppModel(Protocol):
    """An app's name, its agents, its projections, its views (projections and aggregates: what the
    change feed maintains) and every table it writes or reads."""

    @property
    def name(self) -> str: ...

    @property
    def agents(self) -> Sequence[AgentModel]: ...

    @property
    def projections(self) -> Sequence[Projection]: ...

    @property
    def views(self) -> Sequence[Projection]: ...

    @property
    def tables(self) -> Sequence[TableSchema]: ...
