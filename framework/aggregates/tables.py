"""The tables of an aggregate: contributions by entity, the same by group bucket, the buckets'
sub-totals and the group totals.

- ``<name>_contrib``: partition ``entity`` (the entity's document id), clustering ``series``
  (the group-key values as JSON) and ``window`` (its start, 0 unwindowed); ``measures`` as JSON,
  or empty for a group the entity left, and ``mark``, the entity's version mark it was computed
  at. Written by ``contributions.py``.
- ``<name>_members``: the same rows by group bucket: partition ``series``, ``window``,
  ``bucket`` (``Aggregate.bucket_of(entity)``, always 0 with one bucket); clustering ``entity``.
- ``<name>_buckets``: partition ``series``, ``window``, clustering ``bucket``: the reduction of
  each bucket's ``_members`` partition (``measures``, ``members``, ``reflects``), for an aggregate
  of more than one bucket only. A group's total is the reduction of its buckets' (of its one
  ``_members`` partition with one bucket).
- ``<name>_totals``: partition ``series``, clustering ``window``: ``measures`` (JSON), ``members``
  (how many entities contribute), ``reflects`` (the highest version of those contributions) and,
  for a windowed aggregate with ``final_after_s``, ``revisions`` (how many times the totals
  changed while the window was final; a window emptied after it had some keeps a row with this
  cell only). Written by ``totals.py`` only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

from framework.core.aggregate import Aggregate
from framework.core.schema import Column, TableSchema

__all__ = ["AggregateTables", "tables_of", "encode_measures", "decode_measures"]


class AggregateTables:
    """The table schemas of one aggregate."""

    def __init__(self, aggregate: Aggregate) -> None:
        n = aggregate.name
        measured = (Column("measures", "text"), Column("mark", "bigint"))
        self.contrib = TableSchema(
            f"{n}_contrib", (Column("entity", "text"),), measured,
            clustering_key=(Column("series", "text"), Column("window", "bigint")),
        )  # fmt: skip
        group = (Column("series", "text"), Column("window", "bigint"))
        bucket = Column("bucket", "bigint")
        self.members = TableSchema(
            f"{n}_members", (*group, bucket), (Column("measures", "text"),),
            clustering_key=(Column("entity", "text"),),
        )  # fmt: skip
        reduced = (Column("measures", "text"), Column("members", "bigint"), Column("reflects", "bigint"))
        self.buckets = TableSchema(f"{n}_buckets", group, reduced, clustering_key=(bucket,))
        self.totals = TableSchema(
            f"{n}_totals", (Column("series", "text"),), (*reduced, Column("revisions", "bigint")),
            clustering_key=(Column("window", "bigint"),),
        )  # fmt: skip

    @property
    def all(self) -> tuple[TableSchema, ...]:
        """Every table of the aggregate."""
        return (self.contrib, self.members, self.buckets, self.totals)


@functools.lru_cache(maxsize=256)
def tables_of(aggregate: Aggregate) -> AggregateTables:
    """The tables of ``aggregate`` (one object per aggregate)."""
    return AggregateTables(aggregate)


#: ``json.dumps(value, separators=(",", ":"), allow_nan=False)``, its encoder built once.
_measures = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def encode_measures(measures: Mapping[str, float]) -> str:
    """Measures as the compact JSON text the tables hold."""
    return _measures(dict(sorted(measures.items())))


def decode_measures(text: object) -> dict[str, float]:
    """The measures of a ``measures`` cell; ValueError when it is not a JSON object of numbers."""
    value = json.loads(str(text))
    if not isinstance(value, dict) or not all(isinstance(v, int | float) for v in value.values()):
        raise ValueError(f"not measures: {text!r}")
    return value
