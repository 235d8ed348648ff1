"""Elasticsearch URLs, as the CLI and app settings name an index cluster.

Form: ``http[s]://[user:password@]host[:port][?option=value&...]``. Options: ``request_timeout``
(seconds a request may take, default the caller's), ``max_retries`` (retries of a request that
failed to connect or timed out, default 0). A big point-in-time or a slow cluster may need a longer
``request_timeout`` than the 10 s a worker's client waits (30 s the Spark jobs').
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = ["parse_url"]


def parse_url(url: str) -> tuple[str, dict[str, Any]]:
    """``url`` without its options, and the options as ``ElasticsearchIndex`` keyword arguments;
    ValueError when an option is unknown or malformed."""
    parts = urlsplit(url)
    kwargs: dict[str, Any] = {}
    try:
        for name, value in parse_qsl(parts.query, strict_parsing=bool(parts.query)):
            if name == "request_timeout":
                kwargs[name] = float(value)
                if not kwargs[name] > 0:
                    raise ValueError(f"request_timeout must be positive, got {value!r}")
            elif name == "max_retries":
                kwargs[name] = int(value)
                if kwargs[name] < 0:
                    raise ValueError(f"max_retries must be at least 0, got {value!r}")
            else:
                raise ValueError(f"unknown Elasticsearch URL option {name!r} (request_timeout, max_retries)")
    except ValueError as exc:
        where = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))  # no credentials
        raise ValueError(f"{exc} in {where!r}") from None
    return urlunsplit(parts._replace(query="")), kwargs
