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
directory too).

On any other master (a cluster: ``spark://``, ``yarn``, ``k8s://``) the code reaches the executors as
PySpark users ship it: a zip of converge's packages and the app's (``code_zip``) built at job start
and given as ``spark.submit.pyFiles``; the executors' interpreter is ``PYSPARK_PYTHON`` (the driver's
by default: right when the workers share this machine's environment; on a real cluster a packed
environment shipped with ``spark.archives``, see docs/how-to/spark-cluster.md). A master on the
loopback address gets a driver bound to it too.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import zipfile
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
    "CONVERGE_PACKAGES",
    "code_packages",
    "code_zip",
    "is_local",
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

#: A cluster master's defaults (its ``spark-defaults.conf`` and the job's conf come on top).
_CLUSTER_DEFAULTS: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


#: The driver JVM's options of a short job on a local master.
SHORT_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


#: converge's own packages, shipped to a cluster's executors with the app's.
CONVERGE_PACKAGES = ("framework", "stores", "spark_batch")


def is_local(master: str) -> bool:
    """Whether ``master`` runs the executors in the driver's JVM (``local``, ``local[N]``...)."""
    return master.startswith("local")


def code_packages(app: str | None = None) -> dict[str, Path]:
    """The top-level packages a cluster's executors need, by name: converge's, the app's
    (``MODULE:ATTR``: the top-level package of MODULE) and every other top-level package this process
    has imported from the directory that holds the app's (the app's own imports of its project)."""
    out: dict[str, Path] = {name: Path(PROJECT_ROOT) / name for name in CONVERGE_PACKAGES}
    if not app:
        return out
    top = app.split(":", 1)[0].split(".", 1)[0]
    module = sys.modules.get(top)
    where = getattr(module, "__file__", None)
    if module is None or where is None:
        return out
    source = Path(where).resolve()
    pkg = source.parent if source.name == "__init__.py" else source
    out[top] = pkg
    root = pkg.parent
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if "." in name or file is None or name in out:
            continue
        path = Path(file).resolve()
        if path.parent.parent == root and path.name == "__init__.py":
            out[name] = path.parent
        elif path.parent == root and path.suffix == ".py":
            out[name] = path
    return out


def code_zip(app: str | None = None, directory: str | Path | None = None) -> Path:
    """A zip of ``code_packages(app)`` (sources only) in ``directory`` (default: a temporary
    directory removed at exit), for ``spark.submit.pyFiles``."""
    if directory is None:
        directory = tempfile.mkdtemp(prefix="converge-pyfiles-")
        atexit.register(shutil.rmtree, directory, True)
    target = Path(directory) / "converge-code.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path in sorted(code_packages(app).items()):
            if path.is_file():
                zf.write(path, path.name)
                continue
            for file in sorted(path.rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".pyc":
                    zf.write(file, str(Path(name) / file.relative_to(path)))
    return target


def _spark_default(key: str) -> str | None:
    """``key`` of ``spark-defaults.conf`` in ``SPARK_CONF_DIR`` (the job's conf replaces it)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    path = Path(conf_dir) / "spark-defaults.conf" if conf_dir else None
    if path is None or not path.is_file():
        return None
    for line in path.read_text().splitlines():
        name, value = (re.split(r"\s*[=:\s]\s*", line.strip(), maxsplit=1) + [""])[:2]
        if name == key:
            return value.strip()
    return None


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
    app: str | None = None,
) -> SparkSession:
    """A (possibly existing) session on ``master``; ``conf`` overrides the defaults; ``short``: a
    job on a small input (see the module's notes; it counts only when this call starts the JVM);
    ``app``: the job's ``MODULE:ATTR``, whose packages a cluster's executors get (``code_zip``)."""
    _python_env()
    master = master or default_master()
    settings = session_conf(master, conf, short=short)
    if not is_local(master) and SparkSession.getActiveSession() is None:
        given = settings.get("spark.submit.pyFiles") or _spark_default("spark.submit.pyFiles") or ""
        shipped = [p for p in given.split(",") if p]
        settings["spark.submit.pyFiles"] = ",".join([str(code_zip(app)), *shipped])
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(env_setting("spark_log_level") or "WARN")
    return spark


def session_conf(
    master: str, conf: Mapping[str, str] | None = None, *, short: bool = False
) -> dict[str, str]:
    """The conf ``spark_session`` gives a session on ``master``: the local defaults on a local
    master (with ``SHORT_JOB_JAVA_OPTIONS`` when ``short``), then ``conf``."""
    settings = dict(_LOCAL_DEFAULTS) if is_local(master) else dict(_CLUSTER_DEFAULTS)
    if short and is_local(master):
        settings["spark.driver.extraJavaOptions"] = SHORT_JOB_JAVA_OPTIONS
    if master.split("://", 1)[-1].split(":", 1)[0] in ("127.0.0.1", "localhost"):
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    settings.update(conf or {})
    return settings


def parallelism(spark: SparkSession, requested: int | None = None) -> int:
    """``requested`` when given, else the default parallelism (scan shards, index slices)."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"partitions must be positive, got {requested}")
        return requested
    return max(1, spark.sparkContext.defaultParallelism)
