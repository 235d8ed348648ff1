"""Micro-batch jobs: the job checkpoint store (exactly-once effect across tables) and the job
coordinator (one job at a time per lock domain, in a declared order)."""

from __future__ import annotations

__all__: list[str] = []
