"""The figures a fault scenario reports: one summary line."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["FaultFigures"]


@dataclass
class FaultFigures:
    """What one fault scenario did and found. ``outages``: broker restarts and index outages;
    ``events``: messages produced; ``lost``/``divergent``: entities (table, key) missing or
    different against the oracle; ``parked``: events in the dead-letter WALs, of which
    ``poison`` were produced as poison (any other parked event is a failure)."""

    scenario: str
    kills: int = 0
    restarts: int = 0
    outages: int = 0
    events: int = 0
    lost: int = 0
    divergent: int = 0
    parked: int = 0
    poison: int = 0
    seconds: float = 0.0

    def settle(self, lost: int, divergent: int, parked: int, started: float) -> None:
        """Record the outcome against the oracle, the parked count and the time since ``started``
        (``time.monotonic``)."""
        self.lost, self.divergent, self.parked = lost, divergent, parked
        self.seconds = time.monotonic() - started

    def line(self) -> str:
        """One summary line of the figures."""
        return (
            f"fault suite [{self.scenario}]: kills={self.kills} restarts={self.restarts} "
            f"outages={self.outages} events={self.events} lost={self.lost} divergent={self.divergent} "
            f"parked={self.parked} poison={self.poison} seconds={self.seconds:.1f}"
        )
