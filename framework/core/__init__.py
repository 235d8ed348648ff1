"""The ground model: events, mutations, keys, schemas, cell rules, rows, state logs, projections, errors.

It imports nothing else of the project.
"""
