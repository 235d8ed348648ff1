"""Aggregates maintained from their entities' current state (``framework.core.aggregate``).

``tables.py`` names an aggregate's tables; ``contributions.py`` writes an entity's
contributions (the projector's target for an aggregate) and announces the groups they touch;
``totals.py`` recomputes those groups' totals from their current contributions. ``query.py``
reads them back (a group's totals, a series' windows, top groups, one entity) and ``http.py``
serves those reads on a worker's web server.
"""
