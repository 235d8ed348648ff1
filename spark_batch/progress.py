"""Progress of Spark jobs: log lines always, a rich progress bar when stdout is a terminal.

``JobProgress`` tags the jobs started inside it with a job group and polls
Spark's status tracker from a daemon thread, counting finished tasks of every
stage of that group. Phases (``phase("scan")``) label the bar and the log.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from types import TracebackType

from pyspark import SparkContext
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["JobProgress", "log"]

log = logging.getLogger("converge.spark")


class JobProgress:
    """Tracks the tasks of the Spark jobs run inside ``with JobProgress(sc, "check"):``."""

    def __init__(
        self,
        sc: SparkContext,
        name: str,
        *,
        interval: float = 0.5,
        log_every: float = 10.0,
        bar: bool | None = None,
    ) -> None:
        self.sc, self.name = sc, name
        self.group = f"converge-{name}-{uuid.uuid4().hex[:8]}"
        self.interval, self.log_every = interval, log_every
        self.bar = sys.stdout.isatty() if bar is None else bar
        self._phase = name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name=f"progress-{name}", daemon=True)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._done_stages: set[int] = set()
        self._seen: dict[int, tuple[int, int]] = {}
        self.started = time.monotonic()

    def phase(self, label: str) -> None:
        """Name what the next jobs do (shown on the bar and logged)."""
        self._phase = label
        log.info("%s: %s", self.name, label)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=f"{self.name}: {label}")

    def __enter__(self) -> JobProgress:
        self.sc.setJobGroup(self.group, f"converge {self.name}", interruptOnCancel=True)
        if self.bar:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("tasks"),
                TimeElapsedColumn(),
                console=Console(),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.name, total=None)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._update()
        if self._progress is not None:
            self._progress.stop()
        self.sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        elapsed = time.monotonic() - self.started
        done, total = self.tasks()
        log.info(
            "%s: %s after %.1f s (%d/%d tasks)", self.name, "failed" if exc else "done", elapsed, done, total
        )

    def tasks(self) -> tuple[int, int]:
        """(finished, known) tasks over every stage seen so far."""
        return sum(d for d, _ in self._seen.values()), sum(t for _, t in self._seen.values())

    def _update(self) -> None:
        tracker = self.sc.statusTracker()
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    self._seen[stage_id] = (stage.numCompletedTasks, stage.numTasks)
        if self._progress is not None and self._task is not None:
            done, total = self.tasks()
            self._progress.update(self._task, completed=done, total=total or None)

    def _poll(self) -> None:
        last_log = time.monotonic()
        while not self._stop.wait(self.interval):
            try:
                self._update()
            except Exception:  # noqa: BLE001 - progress must never break a job
                log.debug("progress poll failed", exc_info=True)
                continue
            if time.monotonic() - last_log >= self.log_every:
                last_log = time.monotonic()
                done, total = self.tasks()
                log.info(
                    "%s: %s, %d/%d tasks, %.0f s",
                    self.name,
                    self._phase,
                    done,
                    total,
                    time.monotonic() - self.started,
                )
