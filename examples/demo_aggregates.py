"""The demo's aggregate figures: the stream's totals beside the oracle's, as a table and a PNG chart.

Both read ``Totals`` (``{aggregate: {group id: measures}}``): what the workers' totals tables
hold and what the oracle recomputes from the final entities. The table sums every measure over
all groups of an aggregate and counts the groups that differ; the chart draws each aggregate's
measures per day (summed over the other group keys), the stream as bars and the oracle as
markers, so a divergent day shows as a marker off its bar.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

from rich.table import Table

from examples.activity_platform.oracle import Totals
from framework.core.aggregate import parse_group_id
from framework.core.extras import needs_extra

__all__ = ["figures_table", "draw_chart"]


def _sums(groups: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for measures in groups.values():
        for name, value in measures.items():
            out[name] = out.get(name, 0) + value
    return out


def _by_day(groups: Mapping[str, Mapping[str, float]], measure: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for gid, measures in groups.items():
        day = parse_group_id(gid).window
        out[day] = out.get(day, 0) + measures.get(measure, 0)
    return out


def figures_table(stream: Totals, oracle: Totals) -> Table:
    """Per aggregate and measure: the sum over all groups in the stream and in the oracle, and the
    groups whose totals differ (any measure, or present on one side only)."""
    t = Table(title="aggregates: stream totals beside the oracle's")
    for column in ("aggregate", "measure", "stream", "oracle", "groups", "groups differing"):
        t.add_column(column, justify="left" if column in ("aggregate", "measure") else "right")
    for name in sorted(set(stream) | set(oracle)):
        got, want = stream.get(name, {}), oracle.get(name, {})
        differing = sum(1 for gid in set(got) | set(want) if got.get(gid) != want.get(gid))
        got_sums, want_sums = _sums(got), _sums(want)
        for i, measure in enumerate(sorted(set(got_sums) | set(want_sums))):
            t.add_row(
                name if i == 0 else "", measure, f"{got_sums.get(measure, 0):,.0f}",
                f"{want_sums.get(measure, 0):,.0f}", f"{len(got):,}" if i == 0 else "",
                f"{differing:,}" if i == 0 else "",
            )  # fmt: skip
    return t


def draw_chart(stream: Totals, oracle: Totals, path: str | Path) -> Path:
    """Draw every aggregate's measures per day, stream bars and oracle markers, into the PNG at
    ``path`` (its directory is created); needs the ``report`` extra (matplotlib)."""
    with needs_extra("the demo chart"):
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = sorted(set(stream) | set(oracle))
    rows = max(1, len(names))
    fig, axes = plt.subplots(rows, 1, figsize=(11, 3.6 * rows), dpi=100, squeeze=False)
    try:
        for ax, name in zip(axes[:, 0], names, strict=False):
            got, want = stream.get(name, {}), oracle.get(name, {})
            measures = sorted(set(_sums(got)) | set(_sums(want)))
            days = sorted({parse_group_id(g).window for g in (*got, *want)})
            width = 0.8 / max(1, len(measures))
            for i, measure in enumerate(measures):
                g, w = _by_day(got, measure), _by_day(want, measure)
                xs = [d + (i - (len(measures) - 1) / 2) * width for d in range(len(days))]
                ax.bar(xs, [g.get(d, 0) for d in days], width, label=f"{measure} (stream)", alpha=0.85)
                ax.plot(xs, [w.get(d, 0) for d in days], "k_", markersize=9, markeredgewidth=2,
                        label="oracle" if i == 0 else None)  # fmt: skip
            labels = [dt.datetime.fromtimestamp(d, dt.UTC).strftime("%m-%d") for d in days]
            ax.set_xticks(range(len(days)), labels, rotation=60, fontsize=7)
            ax.set_title(f"{name}: per day (window start, UTC), summed over its other group keys", fontsize=9)
            ax.legend(fontsize=7, ncols=len(measures) + 1)
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
