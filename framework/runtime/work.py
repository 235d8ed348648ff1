"""``Work``: one received message as the scheduler and the processors see it."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Work"]


@dataclass(slots=True)
class Work:
    """One received message: where it came from, its key and raw value, and how to ack it."""

    tp: Hashable
    offset: int
    key: bytes | None
    value: bytes | None
    ack: Callable[[], Any] = field(repr=False, default=lambda: None)
    attempts: int = 0
    relation: Hashable = None
    event: Any = field(default=None, repr=False)
    #: the scheduler's epoch of ``tp`` when the record was taken (``KeyedScheduler.epoch``);
    #: work of an earlier epoch is never tracked. None: not stamped (taken as current).
    epoch: int | None = None
    #: the record's Kafka timestamp (epoch ms, None: unknown) and headers (pairs of name and value,
    #: as the consumer gives them), for a decoder
    timestamp: int | None = None
    headers: Any = ()
    #: the agent's decoder (``framework.decoders``; None: converge's envelope), set by ``prepare``
    decoder: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.relation is None:
            self.relation = self.key
