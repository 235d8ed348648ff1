"""Job progress: finished tasks of the jobs run inside, logged, and drawn as a bar on request."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import SparkSession

from spark_batch.progress import JobProgress


@pytest.mark.parametrize("bar", [False, True])
def test_progress_counts_the_tasks_of_its_jobs(
    spark: SparkSession, bar: bool, caplog: pytest.LogCaptureFixture
) -> None:
    sc = spark.sparkContext
    sc.parallelize(range(10), 2).count()  # a job outside: not counted
    with caplog.at_level(logging.INFO, logger="converge.spark"):
        with JobProgress(sc, "probe", interval=0.05, bar=bar) as progress:
            progress.phase("counting")
            assert sc.parallelize(range(30), 3).map(lambda x: x * 2).count() == 30
            sc.parallelize(range(5), 1).count()
    assert progress.tasks() == (4, 4)
    messages = [r.getMessage() for r in caplog.records]
    assert "probe: counting" in messages
    assert any(m.startswith("probe: done after") and "(4/4 tasks)" in m for m in messages)
    assert sc.getLocalProperty("spark.jobGroup.id") is None
