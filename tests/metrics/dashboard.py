"""The Grafana dashboard in the repo, read for the tests: the metric names its queries use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "converge.json"
_NAME = re.compile(r"\bconverge_[a-z_]+\b")


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' targets and the variables' queries."""
    out = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    out += [v["definition"] for v in dashboard["templating"]["list"] if v.get("type") == "query"]
    return out


def verify_names() -> set[str]:
    """The sample names of the change verifier (exported only by a worker that runs it)."""
    from framework.metrics import names

    counters = {*names.VERIFY_COUNTERS.values(), *names.VERIFY_BY_CATEGORY.values()}
    lag = {f"{names.VERIFY_LAG}_{part}" for part in ("bucket", "sum", "count")}
    return {f"{n}_total" for n in counters} | lag | {names.VERIFY_BEHIND, names.VERIFY_SWEEP_AGE}


def metric_names(dashboard: dict[str, Any]) -> set[str]:
    """The sample names (``converge_...``) its queries read."""
    return {m for q in queries(dashboard) for m in _NAME.findall(q)}
