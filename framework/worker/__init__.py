"""The worker: assembled from an ``App``'s declarations, run as a process.

- ``wiring``: ``build_worker(app, settings)``, the Faust app that runs every agent and projector;
- ``faust_app``: the Faust app it builds on, configured for ordered acknowledgement;
- ``resources``: the store, index, ledger and dead-letter WAL a worker opens;
- ``loading``: the object, ``App`` or Faust app that ``MODULE:ATTR`` names;
- ``run``: this process as the worker (event loop, bounded stop, frozen start-up heap);
- ``heap``: the garbage collector set for a long-running worker;
- ``processes``: start and stop ``converge worker`` subprocesses (the demo, benchmarks, tests).

The assembly sits above the declaration: it imports ``App``, and ``App`` imports none of it.
"""
