"""The activity platform's ID mutation: the CRM converts leads into contacts, merges records and
deletes them.

Requests arrive on ``activity.id_requests`` (``framework.idmutation.IdRequest`` as JSON); the
owner table is ``owner_activity``, partitioned by ``(org_id, owner_id)``. A created event that
still names an old owner id after its mutation (the mailbox or calendar sync has not caught up)
is stored under the final id by the worker's resolution step; the ID mutation job moves the rows
written before the mutation.
"""

from __future__ import annotations

from framework.idmutation import IdMutation, OwnerColumn

__all__ = ["TOPIC_ID_REQUESTS", "ID_MUTATION"]

TOPIC_ID_REQUESTS = "activity.id_requests"

ID_MUTATION = IdMutation(TOPIC_ID_REQUESTS, columns=(OwnerColumn("owner_activity", "owner_id", "org_id"),))
