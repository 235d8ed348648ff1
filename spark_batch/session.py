"""The Spark session factory of the batch layer.

The master comes from the argument, else the ``spark_master`` setting
(``CONVERGE_SPARK_MASTER``), else ``local[2]``. Local masters get small-machine defaults (few shuffle
partitions, no UI, no console progress bar: the jobs draw their own) and a Python worker daemon
that imports the batch layer once before it forks the workers (``spark_batch.worker_daemon``); a
short job (``short=True``: a small input) also gets a JVM with only the quick JIT compiler and the
serial collector, whose optimising compiler and collector threads would cost it more CPU than they
save (a long job's hot loops need the optimised code). The
executors' Python is the driver's interpreter unless ``PYSPARK_PYTHON`` is
set, and the project root and the working directory are put on their
``PYTHONPATH`` so the functions shipped to them import the same modules,
the app's included (``--app MODULE:ATTR`` is loaded from the working
directory too); on a cluster, install the project and the app on the
executors instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from framework.settings import env_setting

__all__ = [
    "spark_session",
    "session_conf",
    "default_master",
    "parallelism",
    "PROJECT_ROOT",
    "SHORT_JOB_JAVA_OPTIONS",
]

#: The directory holding the ``spark_batch`` package.
PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)

_LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.python.worker.reuse": "true",
    "spark.python.daemon.module": "spark_batch.worker_daemon",
    "spark.sql.session.timeZone": "UTC",
}


#: The driver JVM's options of a short job on a local master.
SHORT_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def default_master() -> str:
    """The ``spark_master`` setting (``CONVERGE_SPARK_MASTER``, default ``local[2]``)."""
    return env_setting("spark_master") or "local[2]"


def _python_env() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    missing = [p for p in (PROJECT_ROOT, os.getcwd()) if p not in paths]
    if missing:
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*missing, *paths]))


def spark_session(
    app_name: str = "converge",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    *,
    short: bool = False,
) -> SparkSession:
    """A (possibly existing) session on ``master``; ``conf`` overrides the defaults; ``short``: a
    job on a small input (see the module's notes; it counts only when this call starts the JVM)."""
    _python_env()
    master = master or default_master()
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in session_conf(master, conf, short=short).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(env_setting("spark_log_level") or "WARN")
    return spark


def session_conf(
    master: str, conf: Mapping[str, str] | None = None, *, short: bool = False
) -> dict[str, str]:
    """The conf ``spark_session`` gives a session on ``master``: the local defaults on a local
    master (with ``SHORT_JOB_JAVA_OPTIONS`` when ``short``), then ``conf``."""
    settings = dict(_LOCAL_DEFAULTS) if master.startswith("local") else {}
    if short and master.startswith("local"):
        settings["spark.driver.extraJavaOptions"] = SHORT_JOB_JAVA_OPTIONS
    settings.update(conf or {})
    return settings


def parallelism(spark: SparkSession, requested: int | None = None) -> int:
    """``requested`` when given, else the default parallelism (scan shards, index slices)."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"partitions must be positive, got {requested}")
        return requested
    return max(1, spark.sparkContext.defaultParallelism)
