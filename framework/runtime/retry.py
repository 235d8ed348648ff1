"""Retry delays for transient failures."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential back-off with full jitter, capped.

    The delay before attempt ``n + 1`` after ``n`` failures is drawn from
    ``[base * 2**(n-1) / 2, base * 2**(n-1)]``, capped at ``max_delay``.
    """

    base_delay: float = 0.05
    max_delay: float = 5.0
    jitter: bool = True

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        ceiling = min(self.max_delay, self.base_delay * (2 ** min(failures - 1, 30)))
        if not self.jitter:
            return ceiling
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not security
