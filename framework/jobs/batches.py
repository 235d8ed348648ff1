"""The job checkpoint store: exactly-once effect across the tables a micro-batch job writes.

Per job it keeps, on any ``framework.coordination.CheckpointStore`` (SQLite
embedded, ZooKeeper in production), two kinds of checkpoint:

- ``jobs/<job>/batch``: the current batch, its id (1, 2, ...), its input
  (Kafka offset ranges per topic partition, or a file set) and the time it
  began, recorded *before* any process runs it;
- ``jobs/<job>/done/<process>``: per process (one per target table or step),
  the id of the last batch it completed, written after its writes are
  durable.

On start a job reads both (``state``). A process whose last batch lags the
current one re-runs exactly that batch's input, alone (``lagging``); only when
every process completed the current batch may the next one begin
(``begin``). Every write is a compare-and-set on the version read before, so
a second run of the same job that moved the checkpoints fences this one
(``JobFenced``) instead of both writing. Writes of the processes themselves
are versioned upserts, so the re-run of a process is idempotent; this store
makes every batch complete in every process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.coordination.checkpoints import CheckpointConflict, CheckpointStore, check_name
from framework.core.errors import ConvergeError

__all__ = [
    "OffsetRange",
    "BatchInput",
    "Batch",
    "JobState",
    "JobCheckpoints",
    "JobCheckpointError",
    "JobFenced",
]


class JobCheckpointError(ConvergeError, RuntimeError):
    """The job's checkpoints do not allow the step asked for (or are malformed)."""


class JobFenced(JobCheckpointError):
    """Another run of the same job changed its checkpoints since this run read them."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``start`` (included) to ``end`` (excluded) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if not self.topic or self.partition < 0 or not 0 <= self.start <= self.end:
            raise ValueError(f"bad offset range {self.topic}[{self.partition}] {self.start}..{self.end}")

    @property
    def size(self) -> int:
        """How many offsets the range spans."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class BatchInput:
    """What one batch reads: Kafka offset ranges (every partition the job reads, empty ranges
    included, so the next batch knows where to start) or a set of files."""

    ranges: tuple[OffsetRange, ...] = ()
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ranges and self.files:
            raise ValueError("a batch reads Kafka offset ranges or files, not both")
        seen = {(r.topic, r.partition) for r in self.ranges}
        if len(seen) != len(self.ranges):
            raise ValueError("a batch has one offset range per topic partition")

    @property
    def empty(self) -> bool:
        """True when the batch would read nothing."""
        return not self.files and all(r.size == 0 for r in self.ranges)

    def ends(self) -> dict[tuple[str, int], int]:
        """The end offset of every topic partition: where the next batch starts."""
        return {(r.topic, r.partition): r.end for r in self.ranges}

    def to_json(self) -> dict[str, Any]:
        if self.files:
            return {"files": list(self.files)}
        return {"ranges": [[r.topic, r.partition, r.start, r.end] for r in self.ranges]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchInput:
        ranges = tuple(OffsetRange(str(t), int(p), int(s), int(e)) for t, p, s, e in data.get("ranges", ()))
        return cls(ranges=ranges, files=tuple(str(f) for f in data.get("files", ())))


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch of a job: its id, its input and when it began (epoch microseconds, recorded once,
    so a re-run of any process sees the same value)."""

    batch_id: int
    input: BatchInput
    began_at: int

    def to_json(self) -> str:
        body = {"batch_id": self.batch_id, "began_at": self.began_at, "input": self.input.to_json()}
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Batch:
        data = json.loads(text)
        return cls(int(data["batch_id"]), BatchInput.from_json(data["input"]), int(data["began_at"]))


@dataclass(frozen=True)
class JobState:
    """What a job's checkpoints say: the current batch (None before the first) and, per declared
    process, the id of the last batch it completed (None: none yet)."""

    job: str
    batch: Batch | None
    done: Mapping[str, int | None]
    versions: Mapping[str, int | None] = field(default_factory=dict, repr=False, compare=False)

    def lagging(self) -> tuple[str, ...]:
        """The processes (in declared order) that have not completed the current batch."""
        if self.batch is None:
            return ()
        current = self.batch.batch_id
        return tuple(p for p, last in self.done.items() if last is None or last < current)

    @property
    def complete(self) -> bool:
        """True when every process completed the current batch (or there is none)."""
        return not self.lagging()

    def to_dict(self) -> dict[str, Any]:
        batch = self.batch
        return {
            "job": self.job,
            "batch": None if batch is None else json.loads(batch.to_json()),
            "done": dict(self.done),
            "lagging": list(self.lagging()),
        }


class JobCheckpoints:
    """The checkpoints of the job ``job`` whose processes are ``processes``, on ``store``.

    ``state`` reads them (and remembers the versions it read); ``begin`` and
    ``complete`` write them by compare-and-set against those versions.
    A process declared later than the job's first batch counts as lagging for
    the current batch only: it does not catch up older batches (use a
    backfill for history).
    """

    def __init__(self, store: CheckpointStore, job: str, processes: Sequence[str]) -> None:
        check_name(f"jobs/{job}")
        if not processes:
            raise ValueError("a job has at least one process")
        for p in processes:
            check_name(f"jobs/{job}/done/{p}")
        if len(set(processes)) != len(processes):
            raise ValueError(f"duplicate process names: {list(processes)}")
        self.store = store
        self.job = job
        self.processes = tuple(processes)
        self._state: JobState | None = None

    def _batch_name(self) -> str:
        return f"jobs/{self.job}/batch"

    def _done_name(self, process: str) -> str:
        return f"jobs/{self.job}/done/{process}"

    async def state(self) -> JobState:
        """Read the current batch and every process's last completed batch."""
        found = await self.store.get(self._batch_name())
        versions: dict[str, int | None] = {"": None if found is None else found.version}
        batch = None
        if found is not None:
            try:
                batch = Batch.from_json(found.value)
            except (ValueError, KeyError, TypeError) as exc:
                raise JobCheckpointError(f"job {self.job}: malformed batch checkpoint: {exc}") from None
        done: dict[str, int | None] = {}
        for p in self.processes:
            cp = await self.store.get(self._done_name(p))
            versions[p] = None if cp is None else cp.version
            done[p] = finished = None if cp is None else _done_value(self.job, p, cp.value)
            current = 0 if batch is None else batch.batch_id
            if finished is not None and finished > current:
                raise JobCheckpointError(
                    f"job {self.job}: process {p} completed batch {finished}, after the current {current}"
                )
        self._state = JobState(self.job, batch, done, versions)
        return self._state

    async def _current(self) -> JobState:
        return self._state if self._state is not None else await self.state()

    async def begin(self, batch_input: BatchInput, began_at: int) -> Batch:
        """Record the next batch (id + 1) with its input, before any process runs it.

        ``JobCheckpointError`` while a process lags the current batch;
        ``JobFenced`` when another run moved the batch checkpoint.
        """
        state = await self._current()
        if state.batch is not None and not state.complete:  # (complete when there is no batch)
            raise JobCheckpointError(
                f"job {self.job}: batch {state.batch.batch_id} is not complete in "
                f"{', '.join(state.lagging())}: repair it before the next batch"
            )
        batch = Batch(1 if state.batch is None else state.batch.batch_id + 1, batch_input, began_at)
        try:
            written = await self.store.compare_and_set(
                self._batch_name(), batch.to_json(), state.versions.get("")
            )
        except CheckpointConflict as exc:
            self._state = None
            raise JobFenced(f"job {self.job}: another run began a batch ({exc})") from None
        self._state = JobState(self.job, batch, dict(state.done), {**state.versions, "": written.version})
        return batch

    async def complete(self, process: str, batch: Batch) -> None:
        """Record that ``process`` completed ``batch`` (call after its writes are durable).

        ``JobCheckpointError`` unless ``batch`` is the current batch and the
        process has not completed it yet; ``JobFenced`` when another run
        recorded it first.
        """
        state = await self._current()
        if process not in state.done:
            raise JobCheckpointError(f"job {self.job} has no process {process!r}")
        if state.batch is None or state.batch.batch_id != batch.batch_id:
            raise JobCheckpointError(f"job {self.job}: batch {batch.batch_id} is not the current batch")
        last = state.done[process]
        if last is not None and last >= batch.batch_id:
            raise JobCheckpointError(f"job {self.job}: {process} already completed batch {batch.batch_id}")
        expected = state.versions.get(process)
        value = json.dumps({"batch_id": batch.batch_id})
        try:
            written = await self.store.compare_and_set(self._done_name(process), value, expected)
        except CheckpointConflict as exc:
            self._state = None
            raise JobFenced(f"job {self.job}: another run recorded {process} ({exc})") from None
        self._state = JobState(
            self.job,
            state.batch,
            {**state.done, process: batch.batch_id},
            {**state.versions, process: written.version},
        )


def _done_value(job: str, process: str, text: str) -> int:
    try:
        value = json.loads(text)["batch_id"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(value)
        return value
    except (ValueError, KeyError, TypeError) as exc:
        raise JobCheckpointError(f"job {job}: malformed checkpoint of process {process}: {exc}") from None
