"""A second example app: a multi-tenant support desk (tickets, status, comments, enrichment, erasure).

Written only against the public API (``from framework import ...``):
``schemas`` (tables), ``identity`` (natural keys from the ordering key),
``payloads`` (event types), ``agents``, ``projection`` and ``app`` (the
wiring); ``generator``, ``history``, ``truth`` and ``oracle`` generate
histories and the state they must converge to, for tests and demos.
"""
