"""What a concrete store test module supplies to the shared store test suites."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from framework.core.schema import Column, TableSchema, state_log_schema
from stores.base import WideColumnStore

__all__ = ["ManualClock", "WideStoreHarness", "hub_schema", "timeline_schema", "log_schema"]


class ManualClock:
    """A clock (epoch seconds) that moves only when told to."""

    def __init__(self, start: float = 1_700_000_000.25) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class WideStoreHarness:
    """Opens the store under test; given to the contract as the ``wide_store`` fixture.

    ``open`` returns a store over the same backing data each time it is called
    (so a store closed and opened again shows whether writes were durable).
    ``clock`` is the store's clock when the test controls it; ``None`` means
    real time. ``sleepy_ttl`` allows one ~2 s sleep to watch a real TTL expire
    (when there is no controllable clock). ``reopenable`` enables the
    close-and-reopen durability test.
    """

    open: Callable[[], Awaitable[WideColumnStore]]
    clock: ManualClock | None = None
    reopenable: bool = False
    sleepy_ttl: bool = True
    opened: list[WideColumnStore] = field(default_factory=list)

    async def store(self) -> WideColumnStore:
        """Open the store and remember it for ``close_all``."""
        s = await self.open()
        self.opened.append(s)
        return s

    def now(self) -> float:
        return self.clock() if self.clock is not None else time.time()

    async def close_all(self) -> None:
        for s in self.opened:
            await s.close()
        self.opened.clear()


def unique(base: str) -> str:
    """A table name unused so far (stores that outlive a test, like a real cluster, stay clean)."""
    return f"{base}_{uuid.uuid4().hex[:12]}"


def hub_schema(name: str, default_ttl: int | None = None) -> TableSchema:
    """A hub table: partition (org, id), one column of every type."""
    return TableSchema(
        name=name,
        partition_key=(Column("org", "text"), Column("id", "bigint")),
        columns=(
            Column("title", "text"),
            Column("n", "bigint"),
            Column("small", "int"),
            Column("score", "double"),
            Column("flag", "boolean"),
            Column("data", "blob"),
        ),
        default_ttl=default_ttl,
    )


def timeline_schema(name: str, order: str = "ASC") -> TableSchema:
    """A clustered table: partition (org), clustering (day bigint, seq text)."""
    return TableSchema(
        name=name,
        partition_key=(Column("org", "text"),),
        clustering_key=(Column("day", "bigint"), Column("seq", "text")),
        clustering_order=order,  # type: ignore[arg-type]
        columns=(Column("note", "text"), Column("weight", "double")),
    )


def log_schema(name: str) -> TableSchema:
    """A state log keyed by entity, with one attribute."""
    return state_log_schema(name, (Column("entity", "text"),), attrs=(Column("actor", "text"),))
