"""Cascading ID mutation: requests that convert, merge or delete an owner's id, collapsed per
tenant to the final id of every (id, version) (``framework.idmutation.collapse``)."""

from __future__ import annotations

from framework.idmutation.collapse import Interval, collapse, final_of, resolve
from framework.idmutation.declare import IdMutation, OwnerColumn, map_topic_of
from framework.idmutation.requests import OPERATIONS, IdRequest, IdRequestError, parse_request

__all__ = [
    "IdMutation",
    "OwnerColumn",
    "map_topic_of",
    "IdRequest",
    "IdRequestError",
    "OPERATIONS",
    "parse_request",
    "Interval",
    "collapse",
    "final_of",
    "resolve",
]
