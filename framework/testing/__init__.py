"""converge's test kit: run an app's events in memory and check its mapping and its convergence.

- ``Driver(app)``: the worker's processing code on an in-memory SQLite store and a
  ``MemoryIndex``; ``send`` events (or raw messages), then read ``rows``, ``row``,
  ``partition``, ``state``, ``documents`` and ``parked``.
- ``make_event``, ``Timeline``: events with sane defaults; an in-order history.
- ``deliveries(history)``: a Hypothesis strategy of delivery orders (shuffles,
  duplicates, replayed tails). Hypothesis comes with the ``testing`` extra
  (``pip install 'converge[testing]'``), which it and the assertions need.
- ``assert_converges(app, history, deliveries=None)``, ``check_convergence``:
  any delivery stores what the in-order pass stores; they fail when a message was parked at
  ``route``, an event still waits for a lookup entry or nothing was written, unless the test
  allows it (``vacuity`` lists why).
- ``assert_pure(agent, events)``: ``handle`` is deterministic, leaves its event alone
  and does no clock, randomness or I/O calls.
- ``MemoryIndex``: the in-memory ``SearchIndex``.
- ``compare_rows``, ``compare_documents``, ``row_cells``, ``hit_document``, ``Divergence``:
  what a run stored against what an oracle expects, one difference at a time.
- ``framework.testing.faults.kill_after``: a fault test's ``after_process`` hook for
  ``run_job`` (SIGKILL after a process recorded a batch).
- The pytest plugin (``framework.testing.plugin``, a ``pytest11`` entry point, so pytest
  loads it wherever converge is installed): fixtures ``converge_driver`` and ``converge_stack``.

Names load on first use, so the pytest plugin costs nothing until a fixture runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.core.lazy import lazy_names

__all__ = [
    "Driver",
    "Parked",
    "MemoryIndex",
    "make_event",
    "Timeline",
    "deliveries",
    "Snapshot",
    "snapshot",
    "run_history",
    "differences",
    "vacuity",
    "assert_converges",
    "check_convergence",
    "assert_pure",
    "forbid_impurity",
    "CellState",
    "Divergence",
    "compare_rows",
    "compare_documents",
    "row_cells",
    "hit_document",
]

_WHERE = {
    "Driver": "framework.testing.driver",
    "Parked": "framework.testing.driver",
    "MemoryIndex": "framework.testing.index",
    "make_event": "framework.testing.builders",
    "Timeline": "framework.testing.builders",
    "deliveries": "framework.testing.strategies",
    "Snapshot": "framework.testing.assertions",
    "snapshot": "framework.testing.assertions",
    "run_history": "framework.testing.assertions",
    "differences": "framework.testing.assertions",
    "vacuity": "framework.testing.assertions",
    "assert_converges": "framework.testing.assertions",
    "check_convergence": "framework.testing.assertions",
    "assert_pure": "framework.testing.purity",
    "forbid_impurity": "framework.testing.purity",
    **dict.fromkeys(
        ("CellState", "Divergence", "compare_rows", "compare_documents", "row_cells", "hit_document"),
        "framework.testing.compare",
    ),
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from framework.testing.assertions import (
        Snapshot,
        assert_converges,
        check_convergence,
        differences,
        run_history,
        snapshot,
        vacuity,
    )
    from framework.testing.builders import Timeline, make_event
    from framework.testing.compare import (
        CellState,
        Divergence,
        compare_documents,
        compare_rows,
        hit_document,
        row_cells,
    )
    from framework.testing.driver import Driver, Parked
    from framework.testing.index import MemoryIndex
    from framework.testing.purity import assert_pure, forbid_impurity
    from framework.testing.strategies import deliveries


__getattr__, __dir__ = lazy_names("framework.testing", globals(), _WHERE)
