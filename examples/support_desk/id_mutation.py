"""The support desk's ID mutation: the CRM converts, merges and deletes requester ids.

Requests arrive on ``support.id_requests`` (``framework.idmutation.IdRequest`` as JSON); the
owner table is ``requester_ticket``, partitioned by ``(tenant, requester_id)``. A ticket event
that names an old requester id after its mutation (the helpdesk has not caught up) is stored
under the final id by the worker's resolution step; the ID mutation job moves the rows
written before the mutation.
"""

from __future__ import annotations

from framework.idmutation import IdMutation, OwnerColumn

__all__ = ["TOPIC_ID_REQUESTS", "ID_MUTATION"]

TOPIC_ID_REQUESTS = "support.id_requests"

ID_MUTATION = IdMutation(
    TOPIC_ID_REQUESTS, columns=(OwnerColumn("requester_ticket", "requester_id", "tenant"),)
)
