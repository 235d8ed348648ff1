"""Fault-injection hooks that tests hand to production code (never read from the environment)."""

from __future__ import annotations

import os
import signal

from framework.jobs.micro_batch import AfterProcess

__all__ = ["kill_after"]


def kill_after(spec: str) -> AfterProcess:
    """An ``after_process`` hook for ``run_job``: SIGKILL this process right after process
    ``PROCESS`` recorded a batch (``PROCESS``) or batch ``BATCH`` (``PROCESS@BATCH``)."""
    name, _, at = spec.partition("@")
    batch = int(at) if at else None

    def hook(process: str, batch_id: int) -> None:
        if process == name and batch in (None, batch_id):
            os.kill(os.getpid(), signal.SIGKILL)

    return hook
