"""Log lines a rebalance makes expected: said once, at INFO, instead of at ERROR each time.

aiokafka logs every offset commit the group coordinator refuses during a
rebalance (``IllegalGeneration``, ``RebalanceInProgress``, ``UnknownMemberId``)
at ERROR, once per commit attempt: one rebalance of a busy worker makes
hundreds. They are expected: the runtime commits only offsets whose work is
done, and the next commit after the rebalance carries them (or the next
owner redelivers them). ``RebalanceCommits`` turns the first of a burst into
one INFO line and drops the rest of the burst (``quiet`` seconds), counting
them in ``dropped``. Any other commit failure keeps its level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RebalanceCommits", "quiet_rebalance_commits"]

#: The logger aiokafka's group coordinator writes commit failures to.
COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
_EXPECTED = ("IllegalGeneration", "RebalanceInProgress", "UnknownMemberId")
_SAID = "offset commit refused while the group rebalances (expected; the next commit carries it): %s"


class RebalanceCommits(logging.Filter):
    """Demotes the commit failures a rebalance causes (the module docstring)."""

    def __init__(self, quiet: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.quiet, self.clock = quiet, clock
        self.dropped = 0
        self._last: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not str(record.msg).startswith("OffsetCommit failed"):
            return True
        text = record.getMessage()
        if not any(name in text for name in _EXPECTED):
            return True
        now = self.clock()
        if self._last is not None and now - self._last < self.quiet:
            self.dropped += 1
            return False
        self._last = now
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.msg = (
            "offset commit refused while the group rebalances (expected; the next commit carries it): %s"
        )
        record.args = (text,)
        return True


def quiet_rebalance_commits(quiet: float = 30.0) -> RebalanceCommits:
    """Install ``RebalanceCommits`` on aiokafka's coordinator logger once; returns the filter."""
    logger = logging.getLogger(COORDINATOR_LOGGER)
    for existing in logger.filters:
        if isinstance(existing, RebalanceCommits):
            return existing
    installed = RebalanceCommits(quiet)
    logger.addFilter(installed)
    return installed
