"""Terminal tables and JSON files for the batch jobs' reports."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from spark_batch.aggregates import CATEGORIES as AGGREGATE_CATEGORIES
from spark_batch.aggregates import AggregateReport
from spark_batch.backfill import BackfillReport
from spark_batch.convergence import CATEGORIES, CheckReport
from spark_batch.reindex import ReindexReport

__all__ = ["console", "write_json", "print_backfill", "print_check", "print_reindex", "print_aggregate"]


def console() -> Console:
    """A console that does not wrap tables when stdout is not a terminal."""
    return Console(width=None if sys.stdout.isatty() else 160)


def write_json(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as indented JSON to ``path``."""
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def print_backfill(con: Console, r: BackfillReport) -> None:
    t = Table("agent", "mutation", "count", title="converge spark backfill")
    for agent, kinds in sorted(r.mutations.items()):
        for kind, n in sorted(kinds.items()):
            t.add_row(escape(agent), kind, f"{n:,}")
    for agent, errors in sorted(r.rejected.items()):
        for error, n in sorted(errors.items()):
            t.add_row(escape(agent), f"[red]rejected: {escape(error)}[/]", f"{n:,}")
    con.print(t)
    rate = r.events / r.seconds if r.seconds else 0.0
    con.print(f"events read {r.events:,}, applied {r.applied:,} in {r.seconds:.1f} s ({rate:,.0f} events/s)")
    if r.parked:
        con.print(f"[red]{r.parked:,} rejected events parked in the dead-letter WAL[/] (converge dlq list)")
    for name, actions in sorted((r.projected or {}).items()):
        done = ", ".join(f"{k} {v:,}" for k, v in sorted(actions.items())) or "nothing"
        con.print(f"projected {escape(name)}: {done}")
    for name, writes in sorted((r.aggregated or {}).items()):
        done = ", ".join(f"{k} {v:,}" for k, v in sorted(writes.items()))
        con.print(f"aggregated {escape(name)}: {done}")
    for s in r.samples[:10]:
        con.print(f"  [red]{escape(s)}[/]")


def print_check(con: Console, r: CheckReport, title: str = "converge spark check") -> None:
    where = f"{r.projection} -> {r.target}" if r.projection else r.target
    t = Table("category", "documents", "sample keys", title=f"{title}: {escape(where)}")
    for c in CATEGORIES:
        n = r.counts.get(c, 0)
        sample = ", ".join(r.samples.get(c, [])[:3]) + (" …" if n > 3 else "")
        t.add_row(c, f"[red]{n:,}[/]" if n else "0", escape(sample))
    con.print(t)
    rate = r.expected_docs / r.seconds if r.seconds else 0.0
    con.print(
        f"documents expected {r.expected_docs:,}, index documents {r.index_docs:,}, "
        f"{r.seconds:.1f} s ({rate:,.0f} documents/s): "
        + ("[green]clean[/]" if r.clean else "[red]diverged[/]")
    )
    if r.repair is not None:
        actions = ", ".join(f"{k} {v:,}" for k, v in sorted(r.repair.items())) or "nothing"
        con.print(f"repair: {actions} in {r.repaired_seconds or 0.0:.1f} s")


def print_reindex(con: Console, r: ReindexReport) -> None:
    t = Table(
        "phase", "documents", title=f"converge spark reindex: {escape(r.alias)} -> {escape(r.new_index)}"
    )
    t.add_row("build", ", ".join(f"{k} {v:,}" for k, v in sorted(r.built.items())) or "0")
    for c in r.catch_up:
        repaired = c.get("repair", {}).get("actions", {})
        found = sum(c["counts"].values())
        t.add_row(f"catch-up {c['phase']}", f"{found:,} divergent, repaired: {repaired or 'nothing'}")
    con.print(t)
    kept = "dropped " + ", ".join(r.dropped) if r.dropped else "kept " + ", ".join(r.old_indices)
    con.print(f"old index {kept}; {r.seconds:.1f} s")


def print_aggregate(con: Console, r: AggregateReport, title: str = "converge spark aggregate") -> None:
    con.print(
        f"{title}: {escape(r.aggregate)}: {r.entities:,} entities ({r.contributing:,} contributing), "
        f"{r.contributions:,} contributions, {r.groups:,} groups in {r.seconds:.1f} s "
        f"({r.rate:,.0f} entities/s)"
    )
    if not r.checked:
        return
    t = Table(
        "divergent", *AGGREGATE_CATEGORIES, "sample", title=f"compared with {escape(r.aggregate)}'s tables"
    )
    for what, counts in (("entities", r.entity_counts), ("groups", r.group_counts)):
        cells = [f"[red]{counts[c]:,}[/]" if counts[c] else "0" for c in AGGREGATE_CATEGORIES]
        sample = next((r.samples[k] for c in AGGREGATE_CATEGORIES if (k := f"{what} {c}") in r.samples), [])
        t.add_row(what, *cells, escape(", ".join(sample[:3])))
    con.print(t)
    con.print(
        f"stored {r.stored_contributions:,} contributions, {r.stored_groups:,} totals: "
        + ("[green]clean[/]" if r.clean else "[red]diverged[/]")
    )
    if r.repair is not None:
        writes = ", ".join(f"{k} {v:,}" for k, v in sorted(r.repair.items()))
        con.print(f"repair: {writes} in {r.repaired_seconds or 0.0:.1f} s")
