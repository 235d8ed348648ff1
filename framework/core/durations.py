"""Durations and times written as text, read as seconds.

A duration is ``90``, ``30s``, ``15m``, ``2h``, ``7d`` or ``1w``; a time is ISO-8601 (UTC unless
it has an offset), epoch seconds, ``now`` or a duration ``ago`` (``7d ago``). Shared by the
settings (``dlq_retention``), the command line (``--grace``, ``--since``; its argparse types wrap
these) and the query routes (``since=7d ago``).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

__all__ = ["parse_duration", "parse_time", "DURATION_HELP", "TIME_HELP"]

DURATION_HELP = "e.g. 90, 30s, 15m, 2h, 7d"
TIME_HELP = "ISO-8601 (UTC unless it has an offset), epoch seconds, or e.g. 30m ago, 2h ago, 7d ago"
#: Epoch seconds beyond this (the year 5138) are taken for milli- or microseconds by mistake.
_MAX_EPOCH_SECONDS = 1e11
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``30s``, ``15m``, ``2h``, ``7d`` or ``1w``; ValueError otherwise."""
    raw = str(text).strip()
    try:
        seconds = float(raw)
    except ValueError:
        m = _DURATION.fullmatch(raw)
        if not m:
            raise ValueError(f"not a duration: {text!r} ({DURATION_HELP})") from None
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"not a duration: {text!r} (a non-negative number of seconds)")
    return seconds


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds of ``text`` (a time, see the module docstring; ``ago`` counts back from
    ``now``, the current time when None); ValueError when it is none of them."""
    raw = str(text).strip()
    now = time.time() if now is None else now
    if raw.lower() == "now":
        return now
    if raw.endswith(" ago"):
        try:
            return now - parse_duration(raw[: -len(" ago")].strip())
        except ValueError:
            raise ValueError(f"not a time: {text!r} ({TIME_HELP})") from None
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        if not 0 <= seconds < _MAX_EPOCH_SECONDS:
            too_large = "epoch SECONDS expected; milli- or microseconds are too large"
            raise ValueError(f"not a time: {text!r} ({too_large})")
        return seconds
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"not a time: {text!r} ({TIME_HELP})") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
