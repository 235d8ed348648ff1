"""The replay screen: parked records of erased subjects are not sent again (``converge dlq replay``).

The erasure removes the parked records that mention the subject it erases;
records parked later (an erased subject's new event that failed to map),
or a dead-letter WAL restored from before the erasure, still hold erased
subjects. Replaying them would put the subjects' bytes back on the topics
(the worker's screen would still keep them out of the store: this keeps
them off the broker too). ``parked_screen`` gives ``framework.dlq.replay``
a test of a record against the app's deny-list, by keyed hash only: every
JSON string of the record's key and value and every token of its key, value
and error text (a run of word characters and ``.%+-@``, as
``framework.erasure.declare.mentions`` delimits a value), with its list
members for declarations with a separator, is hashed under each declared
kind's normalisation; a record is withheld when one of them is denied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from framework.dlq.record import ParkedRecord
from framework.erasure.keyed import ErasureKeyError, subject_hash
from framework.erasure.record import read_denylist

__all__ = ["parked_screen"]

_TOKEN = re.compile(r"[\w.%+\-@]+")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _candidates(rec: ParkedRecord, separators: set[str]) -> set[str]:
    out: set[str] = set()
    for raw in (rec.key, rec.value):
        if raw is None:
            continue
        text = raw.decode("utf-8", "replace")
        out.update(t.rstrip(".") for t in _TOKEN.findall(text))
        try:
            out.update(_strings(json.loads(text)))
        except (ValueError, RecursionError):
            pass
    out.update(t.rstrip(".") for t in _TOKEN.findall(rec.error))
    for sep in separators:
        out.update(part.strip() for c in list(out) if sep in c for part in c.split(sep))
    out.discard("")
    return out


async def parked_screen(store: Any, app: Any, key: bytes | None) -> Callable[[ParkedRecord], bool] | None:
    """True for a parked record that mentions a subject on ``app``'s deny-list in ``store`` (see the
    module docstring); None when the app declares no personal data or erased nobody.
    ErasureKeyError when subjects are erased and no key is given."""
    declared = getattr(app, "personal_data", ())
    if not declared:
        return None
    hashes = (await read_denylist(store, app)).subjects()
    if not hashes:
        return None
    if key is None:
        raise ErasureKeyError(f"app {app.name} has erased subjects: set CONVERGE_ERASURE_KEY to screen them")
    norms = {d.kind: d.norm for d in declared}  # one normalisation per kind (check_declarations)
    separators = {d.separator for d in declared if d.separator}

    def denied(rec: ParkedRecord) -> bool:
        for value in _candidates(rec, separators):
            for kind, norm in norms.items():
                if subject_hash(key, kind, norm(value)) in hashes:
                    return True
        return False

    return denied
