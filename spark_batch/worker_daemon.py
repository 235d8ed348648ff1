"""Spark's Python worker daemon with the batch layer imported before it forks any worker.

Spark starts ``python -m spark_batch.worker_daemon`` (``spark.python.daemon.module``, set by
``spark_batch.session`` for local masters) instead of ``pyspark.daemon``; every worker it forks
inherits PySpark's worker, pyarrow and the executor-side modules of the batch layer already
imported, instead of importing them itself on its first task.
"""

from __future__ import annotations

import pyarrow  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import spark_batch.projection  # noqa: F401
import stores.elasticsearch.index  # noqa: F401
import stores.sqlite.store  # noqa: F401

if __name__ == "__main__":
    manager()
