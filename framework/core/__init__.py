"""The ground model: events, mutations, keys, schemas, cell rules, rows, state logs, projections,
lookups, errors, and ``AppModel`` (what features read of an app).

It imports nothing else of the project.
"""
