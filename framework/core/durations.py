"""Durations written as text (``90``, ``30s``, ``15m``, ``2h``, ``7d``, ``1w``), read as seconds.

Shared by the settings (``dlq_retention``) and the command line (``--grace``, ``--retention``),
whose argparse types wrap ``parse_duration``.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration", "DURATION_HELP"]

DURATION_HELP = "e.g. 90, 30s, 15m, 2h, 7d"
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
