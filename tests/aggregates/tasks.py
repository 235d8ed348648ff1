"""A small app for the aggregate tests: tasks with a team, a status, points and a due time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework import (
    Aggregate,
    App,
    Column,
    Contribution,
    Delete,
    Event,
    KeyedAgent,
    Row,
    TableSchema,
    Upsert,
    Window,
)
from framework.core.aggregate import MeasureKind

TASK = TableSchema(
    "task",
    (Column("task_id", "text"),),
    (Column("team", "text"), Column("status", "text"), Column("points", "double"), Column("due", "bigint")),
)
DAY = 86_400


class TaskAgent(KeyedAgent):
    name = "tasks"
    topic = "tasks-in"
    tables = (TASK,)
    event_types = ("task.set", "task.delete")

    def handle(self, event: Event) -> Iterable[Upsert | Delete]:
        key = {"task_id": event.ordering_key}
        if event.type == "task.set":
            return [Upsert("task", key, dict(event.payload), event.version)]
        return [Delete("task", key, event.version)]


def _task(rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
    live = [r for r in rows["task"] if r.cells]
    return live[0].values() if live else None


class ByTeamStatus(Aggregate):
    """Tasks per team and status: how many, their points, the largest."""

    name = "by_team_status"
    tables = (TASK,)
    group_by = ("team", "status")
    measures: ClassVar[Mapping[str, MeasureKind]] = {"tasks": "count", "points": "sum", "top": "max"}

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        t = _task(rows)
        if t is None or t.get("team") is None or t.get("status") is None:
            return []
        points = float(t.get("points") or 0.0)
        return [Contribution({"team": t["team"], "status": t["status"]}, {"points": points, "top": points})]


class DueByTeam(Aggregate):
    """Open tasks per team in two-day windows (starting daily) of their due time."""

    name = "due_by_team"
    tables = (TASK,)
    group_by = ("team",)
    measures: ClassVar[Mapping[str, MeasureKind]] = {"tasks": "count", "least": "min"}
    window = Window(2 * DAY, DAY)

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        t = _task(rows)
        if t is None or t.get("team") is None or t.get("due") is None or t.get("status") == "done":
            return []
        return [
            Contribution({"team": t["team"]}, {"least": float(t.get("points") or 0.0)}, at=float(t["due"]))
        ]


class DueFinal(DueByTeam):
    """``DueByTeam``, final one day after a window ends (its totals count revisions)."""

    name: ClassVar[str] = "due_final"
    final_after_s: ClassVar[float | None] = DAY


class ByTeamStatusBuckets(ByTeamStatus):
    """``ByTeamStatus`` over three buckets a group."""

    buckets: ClassVar[int] = 3


class DueByTeamBuckets(DueByTeam):
    """``DueByTeam`` over three buckets a group."""

    buckets: ClassVar[int] = 3


def task_app() -> App:
    return App("tasks", agents=[TaskAgent()], aggregates=[ByTeamStatus(), DueByTeam()])


def bucketed_app() -> App:
    """The task app with both aggregates over three buckets a group (the same names and totals)."""
    return App("tasks", agents=[TaskAgent()], aggregates=[ByTeamStatusBuckets(), DueByTeamBuckets()])


def revising_app() -> App:
    """The task app with ``DueFinal`` beside ``DueByTeam``."""
    return App("tasks", agents=[TaskAgent()], aggregates=[DueFinal(), DueByTeam()])
