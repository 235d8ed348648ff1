"""ID mutation requests: an owner's id changed at the source (converted, merged or deleted).

A request names its tenant, the operation, the old id, the new id (none for
a delete), the time the source executed it (``executed_at``, microseconds on
the clock of event versions) and a request id (duplicates of one request id
are one request). Ids are unique only within a tenant.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from framework.core.errors import BadMessage
from framework.core.mutations import check_version

__all__ = ["OPERATIONS", "IdRequest", "IdRequestError", "parse_request"]

#: The operations a request may carry: ``convert`` and ``merge`` move an id's rows to ``new_id``
#: (a merge is several old ids moved to one new id); ``delete`` removes them.
OPERATIONS: tuple[str, ...] = ("convert", "merge", "delete")
Operation = Literal["convert", "merge", "delete"]
_MAX_TEXT = 512


class IdRequestError(BadMessage):
    """A malformed ID mutation request (parked, never applied)."""


def _text(raw: Mapping[str, Any], name: str) -> str:
    value = raw.get(name)
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise IdRequestError(
            f"id request: {name} must be a non-empty string of at most {_MAX_TEXT} characters"
        )
    return value


@dataclass(frozen=True, slots=True, order=True)
class IdRequest:
    """One ID mutation request (see the module docstring)."""

    executed_at: int
    request_id: str
    tenant: str
    op: Operation
    old_id: str
    new_id: str | None = None

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise IdRequestError(
                f"id request {self.request_id!r}: op must be one of {OPERATIONS}, got {self.op!r}"
            )
        try:
            check_version(self.executed_at, "executed_at")
        except BadMessage as exc:
            raise IdRequestError(f"id request {self.request_id!r}: {exc}") from None
        if self.op == "delete":
            if self.new_id is not None:
                raise IdRequestError(f"id request {self.request_id!r}: a delete carries no new_id")
        elif self.new_id is None or self.new_id == self.old_id:
            raise IdRequestError(
                f"id request {self.request_id!r}: a {self.op} needs a new_id other than old_id"
            )

    def to_dict(self) -> dict[str, Any]:
        """The request as the JSON object ``parse_request`` reads."""
        return {
            "request_id": self.request_id,
            "tenant": self.tenant,
            "op": self.op,
            "old_id": self.old_id,
            "new_id": self.new_id,
            "executed_at": self.executed_at,
        }


def parse_request(raw: bytes | str | Mapping[str, Any]) -> IdRequest:
    """Parse a request from JSON (bytes, text) or a decoded object; raise ``IdRequestError``."""
    if isinstance(raw, bytes | str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise IdRequestError(f"id request: not JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise IdRequestError("id request: must be a JSON object")
    op = raw.get("op")
    new_id = raw.get("new_id")
    if new_id is not None:
        new_id = _text(raw, "new_id")
    executed_at = raw.get("executed_at")
    if isinstance(executed_at, bool) or not isinstance(executed_at, int):
        raise IdRequestError("id request: executed_at must be an integer (microseconds)")
    return IdRequest(
        executed_at=executed_at,
        request_id=_text(raw, "request_id"),
        tenant=_text(raw, "tenant"),
        op=op,  # type: ignore[arg-type]  # checked in __post_init__
        old_id=_text(raw, "old_id"),
        new_id=new_id,
    )
