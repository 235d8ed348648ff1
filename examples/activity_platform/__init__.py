"""The reference activity platform: event history generator, ground truth and oracle."""

from examples.activity_platform.delivery import DeliveryPlan
from examples.activity_platform.generator import START_MICROS, generate_history
from examples.activity_platform.history import History, HistoryStats
from examples.activity_platform.oracle import (
    Divergence,
    Expected,
    compare_documents,
    compare_engagement,
    compare_rows,
    expected_state,
    hit_document,
    row_cells,
)

__all__ = [
    "DeliveryPlan",
    "START_MICROS",
    "generate_history",
    "History",
    "HistoryStats",
    "Divergence",
    "Expected",
    "expected_state",
    "compare_rows",
    "compare_engagement",
    "compare_documents",
    "row_cells",
    "hit_document",
]
