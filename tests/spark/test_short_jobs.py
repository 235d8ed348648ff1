"""Which Spark jobs run as short ones: the inputs' size, and the session conf a short job gets."""

from __future__ import annotations

from pathlib import Path

from examples.activity_platform.app import app
from spark_batch.preflight import input_bytes
from spark_batch.session import SHORT_JOB_JAVA_OPTIONS, session_conf
from stores.sqlite.engine import SqliteEngine


def test_input_bytes_counts_the_sqlite_store_and_parquet_files(tmp_path: Path) -> None:
    db = tmp_path / "wide.db"
    engine = SqliteEngine(db)
    for table in app.tables:
        engine.ensure_table(table)
    engine.close()
    parquet = tmp_path / "rows"
    (parquet / "part").mkdir(parents=True)
    (parquet / "part" / "a.parquet").write_bytes(b"x" * 1000)
    (parquet / "_SUCCESS").write_bytes(b"")
    store = db.stat().st_size + sum(p.stat().st_size for p in tmp_path.glob("wide.db-wal"))
    assert store > 0
    assert input_bytes(f"sqlite:///{db}") == store
    assert input_bytes(f"sqlite:///{db}", str(parquet), None) == store + 1000
    assert input_bytes(None, str(tmp_path / "row*")) == 1000
    assert input_bytes("cassandra://127.0.0.1/ks") is None


def test_a_short_job_on_a_local_master_gets_the_quick_jvm_and_nothing_else_does() -> None:
    key = "spark.driver.extraJavaOptions"
    assert session_conf("local[2]", short=True)[key] == SHORT_JOB_JAVA_OPTIONS
    assert key not in session_conf("local[2]")
    assert key not in session_conf("spark://host:7077", short=True)
    assert session_conf("local[2]", {key: "-Xss4m"}, short=True)[key] == "-Xss4m"
    assert session_conf("local[2]")["spark.python.daemon.module"] == "spark_batch.worker_daemon"
