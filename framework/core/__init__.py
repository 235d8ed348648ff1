"""The ground model: events, mutations, keys, schemas, cell rules, rows, state logs, projections,
lookups, errors, and ``AppModel`` (what features read of an app); with the helpers the settings
share with the layers above (durations, the dead-letter retention rules).

It imports nothing else of the project.
"""
