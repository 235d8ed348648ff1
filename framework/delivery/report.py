"""The delivery report: per capture bucket and in total, how messages fared; a PNG chart of it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from pathlib import Path

from framework.core.extras import needs_extra
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.queries import messages

__all__ = ["Counts", "DeliveryReport", "build_report", "render_text", "write_chart"]


@dataclass
class Counts:
    """Message counts of one bucket (or of all): ``failed_initially`` = needed a retry or was given up."""

    messages: int = 0
    delivered_first_time: int = 0
    failed_initially: int = 0
    recovered_by_retry: int = 0
    failed_despite_retries: int = 0
    retrying: int = 0
    unverified: int = 0

    def add(self, status: str) -> None:
        self.messages += 1
        setattr(self, status, getattr(self, status) + 1)
        if status in ("recovered_by_retry", "failed_despite_retries", "retrying"):
            self.failed_initially += 1

    def merge(self, other: Counts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class DeliveryReport:
    """Counts per bucket start (microseconds), in bucket order, and their total."""

    buckets: dict[int, Counts]
    total: Counts


async def build_report(
    ledger: DeliveryLedger, *, since: int | None = None, until: int | None = None, source: str | None = None
) -> DeliveryReport:
    """Count every message captured in ``[since, until)`` by status, per bucket."""
    buckets: dict[int, Counts] = {}
    async for m in messages(ledger, since=since, until=until, source=source):
        buckets.setdefault(m.entry.ref.bucket, Counts()).add(m.status)
    total = Counts()
    for counts in buckets.values():
        total.merge(counts)
    return DeliveryReport(dict(sorted(buckets.items())), total)


def _when(bucket_us: int) -> str:
    return dt.datetime.fromtimestamp(bucket_us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M")


_COLUMNS = [f.name for f in fields(Counts)]


def render_text(report: DeliveryReport) -> str:
    """A fixed-width table: one line per bucket, then the total."""
    heads = ["bucket (UTC)", *(c.replace("_", " ") for c in _COLUMNS)]
    rows = [[_when(b), *(str(getattr(c, n)) for n in _COLUMNS)] for b, c in report.buckets.items()]
    rows.append(["total", *(str(getattr(report.total, n)) for n in _COLUMNS)])
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def write_chart(report: DeliveryReport, path: str | Path) -> Path:
    """Write a stacked bar chart of the outcomes per bucket to ``path`` (PNG); returns the path."""
    with needs_extra("the delivery chart"):
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    labels = [_when(b) for b in report.buckets] or ["(no messages)"]
    series = [
        ("delivered first time", "delivered_first_time", "#4c9f70"),
        ("recovered by retry", "recovered_by_retry", "#e0a030"),
        ("failed despite retries", "failed_despite_retries", "#c8453c"),
        ("retrying", "retrying", "#7f7fbf"),
        ("not yet verified", "unverified", "#b0b0b0"),
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(labels) + 2), 4.5), dpi=100)
    try:
        bottom = [0] * len(labels)
        for name, attr, color in series:
            values = [getattr(c, attr) for c in report.buckets.values()] or [0]
            ax.bar(labels, values, bottom=bottom, label=name, color=color)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        failed = [c.failed_initially for c in report.buckets.values()] or [0]
        ax.plot(labels, failed, "k.--", label="failed initially")
        t = report.total
        ax.set_title(
            f"{t.messages} messages: {t.delivered_first_time} first time, {t.recovered_by_retry} recovered,"
            f" {t.failed_despite_retries} failed despite retries",
            fontsize=9,
        )
        ax.set_ylabel("messages")
        ax.set_xlabel("capture bucket (UTC)")
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
