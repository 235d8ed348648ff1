"""converge: ordered, at-least-once, convergent stream processing for mutable activity data.

The public API an app team writes against. Names load on first use, so
importing a submodule (``framework.core.mutations``) never pulls in the
runtime.

- ``App``: an app's agents and projections, declared (``framework.worker`` builds its worker).
- ``Settings``: where workers and jobs connect (flags, ``CONVERGE_*`` environment, defaults).
- ``KeyedAgent``: subclass it; ``handle(event)`` maps one event to mutations, purely.
- ``Event``: the envelope: ``event_id``, ``ordering_key``, ``version``, ``occurred_at``,
  ``type``, ``payload``.
- ``Upsert``, ``Delete``, ``LogState``: the mutations, written at their ``version``.
- ``TableSchema``, ``Column``, ``state_log_schema``: declared tables.
- ``natural_key``: deterministic row ids from stable source fields.
- ``Row``, ``current_state``: reading rows and state logs (in projections and tests).
- ``Projection``: a search document built from one partition of its source tables.
- ``Aggregate``, ``Contribution``, ``Window``: totals across entities, each entity's
  contributions recomputed from its current rows (event-time windows optional).
- ``BadMessage``, ``Transient``: raise them to park an event, or to have it retried.
- ``RuntimeConfig``: micro-batching, timeouts and back-off of the runtime;
  ``DedupeConfig``: its optional exact-duplicate skipping.
- ``PersonalData``: which cells hold a data subject's value (``converge erase``); the erasure
  itself (``erase``, ``verify``, ``Subject``, ``erasure_key``) is ``framework.erasure``'s.
- ``publish``: send events to the broker on the topics the app routes them to, keyed by their
  ordering key (tools, tests, back-fills through the stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.core.lazy import lazy_names

__all__ = [
    "App",
    "Settings",
    "KeyedAgent",
    "Event",
    "Upsert",
    "Delete",
    "LogState",
    "TableSchema",
    "Column",
    "state_log_schema",
    "natural_key",
    "Row",
    "current_state",
    "Projection",
    "Aggregate",
    "Contribution",
    "Window",
    "BadMessage",
    "Transient",
    "RuntimeConfig",
    "DedupeConfig",
    "PersonalData",
    "publish",
]

_WHERE = {
    "App": "framework.app",
    "Settings": "framework.settings",
    "KeyedAgent": "framework.runtime.agent",
    "Event": "framework.core.events",
    "Upsert": "framework.core.mutations",
    "Delete": "framework.core.mutations",
    "LogState": "framework.core.mutations",
    "TableSchema": "framework.core.schema",
    "Column": "framework.core.schema",
    "state_log_schema": "framework.core.schema",
    "natural_key": "framework.core.keys",
    "Row": "framework.core.rows",
    "current_state": "framework.core.state_log",
    "Projection": "framework.core.projection",
    "Aggregate": "framework.core.aggregate",
    "Contribution": "framework.core.aggregate",
    "Window": "framework.core.aggregate",
    "BadMessage": "framework.core.errors",
    "Transient": "framework.core.errors",
    "RuntimeConfig": "framework.runtime.binding",
    "DedupeConfig": "framework.runtime.dedupe",
    "PersonalData": "framework.erasure.declare",
    "publish": "framework.publishing",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from framework.app import App
    from framework.core.aggregate import Aggregate, Contribution, Window
    from framework.core.errors import BadMessage, Transient
    from framework.core.events import Event
    from framework.core.keys import natural_key
    from framework.core.mutations import Delete, LogState, Upsert
    from framework.core.projection import Projection
    from framework.core.rows import Row
    from framework.core.schema import Column, TableSchema, state_log_schema
    from framework.core.state_log import current_state
    from framework.erasure.declare import PersonalData
    from framework.publishing import publish
    from framework.runtime.agent import KeyedAgent
    from framework.runtime.binding import RuntimeConfig
    from framework.runtime.dedupe import DedupeConfig
    from framework.settings import Settings


__getattr__, __dir__ = lazy_names("framework", globals(), _WHERE)
