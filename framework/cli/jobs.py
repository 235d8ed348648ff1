"""``converge jobs status``: the lock domains of the job coordinator, their holders, last runners and jobs."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from framework.cli.common import CliParser, UserError, add_json_flag, print_json
from framework.coordination.locks import DomainLocks, DomainStatus, LastRunner
from framework.coordination.open import DEFAULT_JOB_LOCKS_URL, open_domain_locks
from framework.jobs.coordinator import checkpoint_name
from framework.settings import ENV, env_setting

__all__ = ["register", "domain_report"]


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _last(last: LastRunner | None) -> dict[str, Any] | None:
    if last is None:
        return None
    return {"job": last.job, "round": last.round, "state": last.state, "holder": last.holder,
            "at": last.at, "version": last.version}  # fmt: skip


async def _checkpoints(url: str, status: DomainStatus) -> dict[str, dict[str, Any]]:
    """Per member job: its coordinator checkpoint and its micro-batch job's current batch id."""
    from framework.coordination import open_checkpoint_store

    store = await asyncio.to_thread(open_checkpoint_store, url)
    found: dict[str, dict[str, Any]] = {}
    try:
        for member in status.members:
            cp = await store.get(checkpoint_name(status.domain, member.job))
            batch = await store.get(f"jobs/{member.job}/batch")
            batch_id = None
            if batch is not None:
                try:
                    batch_id = json.loads(batch.value).get("batch_id")
                except (ValueError, AttributeError):
                    batch_id = None
            found[member.job] = {
                "checkpoint": None if cp is None else {"value": cp.value, "version": cp.version},
                "batch_id": batch_id,
            }
    finally:
        await store.close()
    return found


def domain_report(status: DomainStatus, checkpoints: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """One domain as the JSON of ``converge jobs status --json``."""
    jobs = []
    for m in status.members:
        entry: dict[str, Any] = {"job": m.job, "predecessor": m.predecessor, "start_with": m.start_with}
        if checkpoints is not None:
            entry.update(checkpoints.get(m.job, {"checkpoint": None, "batch_id": None}))
        jobs.append(entry)
    return {
        "domain": status.domain,
        "holder": status.holders[0] if status.holders else None,
        "contenders": status.holders[1:],
        "expired_lease": status.expired,
        "last_runner": _last(status.last),
        "jobs": jobs,
    }


def _print(report: dict[str, Any]) -> None:
    print(f"domain {report['domain']}")
    holder = report["holder"] or "none"
    if report["expired_lease"]:
        holder += f" (lease of {report['expired_lease']} expired)"
    print(f"  holder       {holder}")
    if report["contenders"]:
        print(f"  trying       {', '.join(report['contenders'])}")
    last = report["last_runner"]
    if last is None:
        print("  last runner  nobody yet")
    else:
        print(f"  last runner  {last['job']}, round {last['round']}, {last['state']} "
              f"at {_when(last['at'])} ({last['holder']})")  # fmt: skip
    described = []
    for job in report["jobs"]:
        order = f"after {job['predecessor']}" if job["predecessor"] else "unordered"
        if job["start_with"] == job["job"]:
            order += ", starts the cycle"
        described.append(f"{job['job']} ({order})")
    width = max((len(d) for d in described), default=0)
    for i, (job, text) in enumerate(zip(report["jobs"], described, strict=True)):
        line = f"  {'jobs' if i == 0 else '':<12} {text:<{width}}"
        if "checkpoint" in job:
            cp = job["checkpoint"]
            line += "  checkpoint " + ("-" if cp is None else f"{cp['value']!r} (v{cp['version']})")
            if job["batch_id"] is not None:
                line += f"  batch {job['batch_id']}"
        print(line.rstrip())


def _open(url: str) -> DomainLocks:
    if url.startswith("sqlite:"):
        from stores.open import sqlite_path

        try:
            path = sqlite_path(url)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if not path.exists():
            raise UserError(f"no job locks at {path} (no coordinated job ran with --locks {url})")
    return open_domain_locks(url)


def _status(args: argparse.Namespace) -> int:
    locks = _open(args.locks)
    try:
        domains = [args.domain] if args.domain else locks.domains()
        statuses = [locks.status(d) for d in domains]
    finally:
        locks.close()
    if args.domain and not (statuses[0].members or statuses[0].last or statuses[0].holders):
        raise UserError(f"no lock domain {args.domain!r} in {args.locks}")
    reports = []
    for status in statuses:
        cps = asyncio.run(_checkpoints(args.checkpoints, status)) if args.checkpoints else None
        reports.append(domain_report(status, cps))
    if args.json:
        print_json({"locks": args.locks, "domains": reports})
        return 0
    if not reports:
        print(f"no lock domains in {args.locks}")
    for report in reports:
        _print(report)
    return 0


def register(
    sub: argparse._SubParsersAction[CliParser],
) -> argparse._SubParsersAction[CliParser]:
    """Add ``converge jobs`` with its ``status`` action; returns the actions, for more of them."""
    jobs = sub.add_parser("jobs", help="coordinated micro-batch jobs: lock domains, turns, checkpoints")
    actions = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    p = actions.add_parser(
        "status",
        help="per lock domain: the lock holder, the last runner, the jobs and their checkpoints",
        description="Show the job coordinator's lock domains: who holds each lock, which job ran last "
        "(round, state), the declared jobs and, with --checkpoints, their checkpoints.",
    )
    p.add_argument(
        "--locks",
        default=env_setting("job_locks") or DEFAULT_JOB_LOCKS_URL,
        help=f"sqlite:///PATH or zookeeper://HOSTS/ROOT (env {ENV['job_locks']}, "
        f"default {DEFAULT_JOB_LOCKS_URL})",
    )
    p.add_argument("--domain", default=None, help="only this lock domain")
    p.add_argument("--checkpoints", default=None, metavar="URL",
                   help="checkpoint store (sqlite:///PATH or zookeeper://HOSTS/ROOT) to show each job's "
                   "checkpoints from")  # fmt: skip
    add_json_flag(p, "print JSON")
    p.set_defaults(func=_status)
    return actions
