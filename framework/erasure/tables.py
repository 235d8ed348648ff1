"""The erasure's own tables: the deny-list the mappings consult and the audit trail.

Neither holds a subject's value: subjects appear only as keyed hashes
(``framework.erasure.keyed``).

- ``converge_erasure_denylist``: partition ``app``, clustering ``subject``
  (the keyed hash); cells ``kind`` and ``erased_at`` (microseconds). One
  partition read gives an app's whole deny-list.
- ``converge_erasure_audit``: partition ``app``, clustering ``(erased_at,
  erasure_id)``; cells ``subject`` (keyed hash), ``kind`` and ``counts``
  (JSON: what was removed where).
- ``converge_erasure_record``: partition ``app``; cells ``role``
  (``record`` or ``replica``) and ``established_at`` (microseconds). The
  marker that a store's deny-list was established (``framework.erasure.record``):
  an empty deny-list table alone proves nothing (a worker or the test kit
  creates it with the app's tables). Not among ``ERASURE_TABLES``: only
  ``framework.erasure.record`` creates it, and no app's data job reads it.
"""

from __future__ import annotations

from framework.core.schema import Column, TableSchema

__all__ = ["DENYLIST_TABLE", "AUDIT_TABLE", "ERASURE_TABLES", "RECORD_TABLE"]

DENYLIST_TABLE = TableSchema(
    "converge_erasure_denylist",
    partition_key=(Column("app", "text"),),
    clustering_key=(Column("subject", "text"),),
    columns=(Column("kind", "text"), Column("erased_at", "bigint")),
)

AUDIT_TABLE = TableSchema(
    "converge_erasure_audit",
    partition_key=(Column("app", "text"),),
    clustering_key=(Column("erased_at", "bigint"), Column("erasure_id", "text")),
    columns=(Column("subject", "text"), Column("kind", "text"), Column("counts", "text")),
)

#: Every table an app that declares personal data needs.
ERASURE_TABLES = (DENYLIST_TABLE, AUDIT_TABLE)

#: The marker of an established deny-list (see the module docstring).
RECORD_TABLE = TableSchema(
    "converge_erasure_record",
    partition_key=(Column("app", "text"),),
    columns=(Column("role", "text"), Column("established_at", "bigint")),
)
