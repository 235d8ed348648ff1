"""The bound on what one repair may delete, and the error of a repair that refuses.

A repair deletes the index documents its store has no partition for (orphans). Pointed at the
wrong store (an empty one, another deployment's), every document is an orphan: a bound on the
deletions stops such a repair before its first write. The bound (setting ``repair_max_deletes``,
``CONVERGE_REPAIR_MAX_DELETES``; ``--max-deletes`` of ``converge spark check`` and ``converge
verify``) is a comma-separated list of limits, each a count (``1000``) or a percentage of the
documents the index holds (``10%``); the smallest applies, a percentage never below
``MIN_ALLOWED`` documents (a handful of orphans in a small index is no sign of a wrong store);
``none`` sets no bound. The default, ``10%,1000``: at most a tenth of the index, and never more
than 1,000 documents. ``--force`` lets one repair pass it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from framework.core.errors import ConvergeError

__all__ = ["RepairRefused", "DeleteBound", "DEFAULT_MAX_DELETES", "MIN_ALLOWED", "parse_delete_bound"]

#: The default bound: a tenth of the index's documents, at most 1,000.
DEFAULT_MAX_DELETES = "10%,1000"
#: A percentage bound allows at least this many deletions.
MIN_ALLOWED = 10


class RepairRefused(ConvergeError):
    """A repair that would do harm refused before its first write (one line says why)."""


@dataclass(frozen=True)
class DeleteBound:
    """At most ``ratio`` of the index's documents (at least ``MIN_ALLOWED``) and at most ``count``
    documents; None: no such limit."""

    ratio: float | None = None
    count: int | None = None
    text: str = "none"

    def allowed(self, index_docs: int) -> int | None:
        """How many deletions a repair of an index holding ``index_docs`` documents may make
        (None: any number)."""
        limits = []
        if self.ratio is not None:
            limits.append(max(MIN_ALLOWED, math.floor(self.ratio * index_docs)))
        if self.count is not None:
            limits.append(self.count)
        return min(limits) if limits else None

    def refusal(self, deletes: int, index_docs: int, what: str) -> str | None:
        """Why a repair of ``what`` deleting ``deletes`` of ``index_docs`` documents must not run
        without ``--force``; None when it may."""
        allowed = self.allowed(index_docs)
        if allowed is None or deletes <= allowed:
            return None
        return (
            f"the repair of {what} would delete {deletes} of its {index_docs} documents, more than the "
            f"bound of {allowed} (repair_max_deletes {self.text}): is the store the one the index was "
            f"built from? Pass --force to delete them anyway, or raise --max-deletes"
        )


def parse_delete_bound(text: str) -> DeleteBound:
    """The bound ``text`` gives (``10%,1000``, ``500``, ``5%``, ``none``); ValueError otherwise."""
    cleaned = text.strip().lower()
    if cleaned in ("none", "off", "unbounded"):
        return DeleteBound(text="none")
    ratio: float | None = None
    count: int | None = None
    for part in (p.strip() for p in cleaned.split(",")):
        try:
            if part.endswith("%"):
                value = float(part[:-1])
                if not 0 <= value <= 100 or ratio is not None:
                    raise ValueError
                ratio = value / 100
            else:
                number = int(part)
                if number < 0 or count is not None:
                    raise ValueError
                count = number
        except ValueError:
            raise ValueError(
                f"a delete bound is a count, a percentage or both (e.g. {DEFAULT_MAX_DELETES}), "
                f"or none; not {text!r}"
            ) from None
    return DeleteBound(ratio, count, ",".join(p.strip() for p in cleaned.split(",")))
