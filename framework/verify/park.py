"""Parking a divergence the verifier cannot repair, in the dead-letter log, for an operator.

The record is a ``partition_changed`` change record naming the partition, on the view's change
topic, keyed by its document id (stage ``verify``, error class the category): once an operator
has dealt with the index's document, ``converge dlq replay`` sends it to the view's projector,
which projects the partition again.
"""

from __future__ import annotations

import logging
import time

from framework.core.projection import Projection
from framework.dlq import DeadLetterWAL, ParkedRecord
from framework.runtime.change_feed import CHANGE_TYPE, partition_record
from framework.verify.verifier import Divergence, Park

__all__ = ["dlq_parker", "STAGE"]

log = logging.getLogger(__name__)

#: The stage of a parked divergence.
STAGE = "verify"


def dlq_parker(views: dict[str, tuple[Projection, str]], wal: DeadLetterWAL) -> Park:
    """``park`` into ``wal``; ``views``: each view by name, with its change topic."""

    async def park(divergence: Divergence, reason: str) -> None:
        view, topic = views[divergence.view]
        now = time.time()
        key, value = partition_record(view, divergence.key, divergence.expected_version, int(now * 1e6))
        log.error("verify: parked %s document %s (%s, partition %s): %s", view.name, divergence.doc_id,
                  divergence.category, dict(divergence.key), reason)  # fmt: skip
        await wal.park(ParkedRecord(
            pipeline=f"verify.{view.name}", topic=topic, partition=-1, offset=-1, key=key, value=value,
            stage=STAGE, error_class=divergence.category, error=reason, parked_at=now,
            event_type=CHANGE_TYPE,
        ))  # fmt: skip

    return park
