"""Adaptive back-off: tell a dead destination from a bad message.

Per sink, the failures of the last ``window_s`` seconds are kept, and the
successes of every event. A sink counts as down when, since its oldest
failure in the window, at least ``down_ratio`` of the outcomes failed across
at least ``down_min_keys`` distinct keys (successes from before the failures
began do not dilute a fresh outage): delays are long and growing, nothing is
parked, and the runtime pauses consumption. The first success afterwards (a
retry acting as a probe) ends the outage. While a sink is down, the runtime also
probes it with a cheap health request (``probe_interval``, see the scheduler): an
answer wakes one blocked key at once, whose success ends the outage and wakes
every other key blocked on that sink, so recovery never waits out a back-off
that grew during a long outage.

A transient failure never parks an event on its own evidence: after
``park_after`` attempts it is parked only when events of other keys went
through since its first failure (the destination works, this event does
not). Otherwise it is retried with growing delays.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

__all__ = ["BackoffConfig", "AdaptiveBackoff", "Decision", "OTHER"]

#: The key of successes that stand for other keys than any failing one (a written batch).
OTHER: Hashable = ("converge", "other keys")


@dataclass(frozen=True)
class BackoffConfig:
    """Thresholds and delays; their defaults are explained in docs/how-to/operate-and-repair.md."""

    window_s: float = 30.0
    down_ratio: float = 0.5
    down_min_keys: int = 3
    min_samples: int = 5
    base_delay: float = 0.1
    max_delay: float = 5.0
    down_base_delay: float = 1.0
    down_max_delay: float = 60.0
    park_after: int = 5
    #: while a sink with a health probe is down: seconds between probes, and each probe's bound
    probe_interval: float = 0.5
    probe_timeout: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.down_ratio <= 1:
            raise ValueError("down_ratio must be in (0, 1]")
        if self.park_after < 1 or self.down_min_keys < 1 or self.window_s <= 0:
            raise ValueError("park_after, down_min_keys and window_s must be positive")
        if self.probe_interval <= 0 or self.probe_timeout <= 0:
            raise ValueError("probe_interval and probe_timeout must be positive")


@dataclass(frozen=True)
class Decision:
    """What to do after a transient failure: wait ``delay`` then retry, or park now."""

    delay: float
    park: bool
    down: bool


class _SinkWindow:
    __slots__ = ("failures", "down", "outages")

    def __init__(self) -> None:
        self.failures: deque[tuple[float, Hashable]] = deque()
        self.down = False
        self.outages = 0


class AdaptiveBackoff:
    """Sliding-window failure ratios per sink and the retry decisions they imply.

    A success counts for every sink (the event went through all of them); a
    failure counts for the sink that failed.
    """

    def status(self) -> dict[str, dict[str, Any]]:
        """Per sink: down or not, outages so far, failures in the window."""
        return {
            sink: {"down": w.down, "outages": w.outages, "recent_failures": len(w.failures)}
            for sink, w in self._sinks.items()
        }

    def __init__(
        self,
        config: BackoffConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = lambda: random.uniform(0.5, 1.0),  # noqa: S311 - not security
    ) -> None:
        self.config = config or BackoffConfig()
        self._clock = clock
        self._jitter = jitter
        self._successes: deque[tuple[float, Hashable]] = deque()
        self._sinks: dict[str, _SinkWindow] = {}

    def _prune(self) -> float:
        now = self._clock()
        horizon = now - self.config.window_s
        while self._successes and self._successes[0][0] < horizon:
            self._successes.popleft()
        for w in self._sinks.values():
            while w.failures and w.failures[0][0] < horizon:
                w.failures.popleft()
        return now

    def record_success(self, key: Hashable = OTHER) -> None:
        """An event of ``key`` went through every sink: a working probe for each of them
        (``OTHER``: events of keys with no failure, e.g. a written micro-batch)."""
        self._successes.append((self._prune(), key))
        for w in self._sinks.values():
            if w.down:
                w.down = False
                w.failures.clear()

    def record_failure(self, sink: str, key: Hashable) -> None:
        now = self._prune()
        w = self._sinks.get(sink)
        if w is None:
            w = self._sinks[sink] = _SinkWindow()
        w.failures.append((now, key))
        if not w.down and self._looks_down(w):
            w.down = True
            w.outages += 1

    def _looks_down(self, w: _SinkWindow) -> bool:
        c = self.config
        since = w.failures[0][0] if w.failures else self._clock()
        total = len(w.failures) + sum(1 for t, _ in reversed(self._successes) if t >= since)
        if total < c.min_samples:
            return False
        failed_keys = {k for _, k in w.failures}
        return len(w.failures) / total >= c.down_ratio and len(failed_keys) >= c.down_min_keys

    def end_outages(self) -> None:
        """Forget every outage (no blocked key is left to probe with)."""
        for w in self._sinks.values():
            if w.down:
                w.down = False
                w.failures.clear()

    def down_sinks(self) -> frozenset[str]:
        """The sinks that count as down now."""
        return frozenset(sink for sink, w in self._sinks.items() if w.down)

    def is_down(self, sink: str) -> bool:
        return sink in self._sinks and self._sinks[sink].down

    @property
    def any_down(self) -> bool:
        return any(w.down for w in self._sinks.values())

    def others_succeeded(self, key: Hashable, since: float) -> bool:
        """True when an event of another key than ``key`` went through at or after ``since``."""
        for t, k in reversed(self._successes):
            if t < since:
                return False
            if k != key:
                return True
        return False

    def decide(self, sink: str, attempts: int, key: Hashable = None, since: float | None = None) -> Decision:
        """The decision after the ``attempts``-th failed attempt of one event of ``key`` at
        ``sink``, whose first failure was at ``since``: park only when other keys got
        through since then (never while the sink is down)."""
        c = self.config
        n = max(attempts, 1)
        growth = 2 ** min(n - 1, 30)
        if self.is_down(sink):
            return Decision(min(c.down_max_delay, c.down_base_delay * growth) * self._jitter(), False, True)
        evidence = since is not None and self.others_succeeded(key, since)
        if attempts >= c.park_after and evidence:
            return Decision(0.0, True, False)
        return Decision(min(c.max_delay, c.base_delay * growth) * self._jitter(), False, False)
