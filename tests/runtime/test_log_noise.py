"""The commit failures a rebalance causes: one INFO line a burst, not an ERROR line each."""

from __future__ import annotations

import logging

import pytest
from aiokafka import errors as Errors

from framework.runtime.log_noise import COORDINATOR_LOGGER, RebalanceCommits, quiet_rebalance_commits

#: The format aiokafka's group coordinator uses for a group error (aiokafka 0.x, ``_do_commit``).
GROUP_ERROR = "OffsetCommit failed for group %s due to group error (%s), will rejoin"


def test_a_burst_of_rebalance_commit_failures_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    quiet = RebalanceCommits(quiet=30.0, clock=lambda: now[0])
    # a logger of its own: the worker's filter may sit on aiokafka's already (another test made a worker)
    logger = logging.getLogger("tests.log_noise.coordinator")
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.DEBUG, logger=logger.name):
            for _ in range(14):
                logger.error(GROUP_ERROR, "g1", Errors.IllegalGenerationError("g1"))
            now[0] += 31  # the next rebalance
            logger.error(GROUP_ERROR, "g1", Errors.RebalanceInProgressError("g1"))
            logger.error("OffsetCommit failed for group %s on partition %s with offset %s: %s",
                         "g1", "t-0", 5, Errors.TopicAuthorizationFailedError())  # fmt: skip
    finally:
        logger.removeFilter(quiet)
    levels = [(r.levelname, "refused while the group rebalances" in r.getMessage()) for r in caplog.records]
    assert levels == [("INFO", True), ("INFO", True), ("ERROR", False)]
    assert "IllegalGenerationError" in caplog.records[0].getMessage()
    assert quiet.dropped == 13


def test_installed_once() -> None:
    first, second = quiet_rebalance_commits(), quiet_rebalance_commits()
    assert first is second
    assert sum(isinstance(f, RebalanceCommits) for f in logging.getLogger(COORDINATOR_LOGGER).filters) == 1
