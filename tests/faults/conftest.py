"""The fault suite's settings and report: default or long variant, seed, one figures line per scenario.

``pytest tests/faults`` runs the default variant; ``--faults-long`` (or
``CONVERGE_FAULTS_LONG=1``) the long one; ``CONVERGE_FAULTS_SEED`` picks the random
kill points and histories (default 13). Each scenario's figures line is printed by the
test (seen with ``pytest -s -n 0``: pytest-xdist's workers print nowhere) and again in the
terminal summary, with or without xdist.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.support.fault_figures import FaultFigures

_FIGURES = "fault suite figures"


@dataclass(frozen=True)
class FaultPlan:
    """The sizes of one variant of the suite."""

    long: bool
    seed: int
    kills: int
    kill_events: int
    stream_events: int
    index_outage_s: float


@pytest.fixture(scope="session")
def fault_plan(pytestconfig: pytest.Config) -> FaultPlan:
    """The default variant (CI: 5 kills, a 12 s index outage) or the long one (50 kills, 60 s)."""
    long = bool(pytestconfig.getoption("--faults-long")) or os.environ.get("CONVERGE_FAULTS_LONG") == "1"
    seed = int(os.environ.get("CONVERGE_FAULTS_SEED", "13"))
    if long:
        return FaultPlan(True, seed, kills=50, kill_events=20_000, stream_events=20_000, index_outage_s=60.0)
    return FaultPlan(False, seed, kills=5, kill_events=4_000, stream_events=4_000, index_outage_s=12.0)


@pytest.fixture()
def report(request: pytest.FixtureRequest) -> Callable[[FaultFigures], None]:
    """Print a scenario's figures line and keep it in the test's report for the terminal summary
    (a report's user properties reach the summary from pytest-xdist's workers too)."""

    def emit(figures: FaultFigures) -> None:
        line = figures.line()
        print(line)
        request.node.user_properties.append((_FIGURES, line))

    return emit


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for r in reports
        if getattr(r, "when", None) == "call"
        for name, value in getattr(r, "user_properties", ())
        if name == _FIGURES
    ]
    if lines:
        terminalreporter.section(_FIGURES)
        for line in lines:
            terminalreporter.write_line(line)
