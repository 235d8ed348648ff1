"""``cassandra://`` store URLs, as the CLI and app settings name a wide-column store.

Form: ``cassandra://[user:password@]host1[:port][,host2[:port]...]/keyspace[?option=value&...]``.
Options: ``consistency`` (a level name, default LOCAL_QUORUM), ``protocol_version`` (4),
``local_dc``, ``create_keyspace`` (true/false), ``replication_factor`` (1),
``max_concurrency``, ``max_batch_statements``, ``request_timeout``, ``fetch_size``,
``connect_timeout``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from cassandra import ConsistencyLevel

from framework.core.mutations import check_identifier

__all__ = ["parse_url"]

_INTS = {"protocol_version", "replication_factor", "max_concurrency", "max_batch_statements", "fetch_size"}
_FLOATS = {"request_timeout", "connect_timeout"}
_BOOLS = {"create_keyspace"}


def parse_url(url: str) -> dict[str, Any]:
    """The keyword arguments of ``CassandraStore.connect`` for ``url``; ValueError when malformed."""
    parts = urlsplit(url)
    if parts.scheme != "cassandra":
        raise ValueError(f"not a cassandra:// URL: {url!r}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    hosts: list[str] = []
    ports: set[int] = set()
    for item in hostlist.split(","):
        item = item.strip()
        if item.startswith("["):  # [ipv6]:port
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = item.partition(":")
        if not host:
            raise ValueError(f"empty host in {url!r}")
        hosts.append(host)
        if port:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"bad port {port!r} in {url!r}")
            ports.add(int(port))
    if len(ports) > 1:
        raise ValueError(f"all contact points must share one port: {url!r}")
    kwargs: dict[str, Any] = {
        "contact_points": hosts,
        "keyspace": check_identifier(parts.path.strip("/"), "keyspace"),
        "port": ports.pop() if ports else 9042,
    }
    if userinfo:
        from cassandra.auth import PlainTextAuthProvider

        user, _, password = userinfo.partition(":")
        kwargs["auth_provider"] = PlainTextAuthProvider(unquote(user), unquote(password))
    for name, value in parse_qsl(parts.query, strict_parsing=bool(parts.query)):
        if name == "consistency":
            if value.upper() not in ConsistencyLevel.name_to_value:
                raise ValueError(f"unknown consistency level {value!r}")
            kwargs[name] = ConsistencyLevel.name_to_value[value.upper()]
        elif name == "local_dc":
            kwargs[name] = value
        elif name in _INTS:
            kwargs[name] = int(value)
        elif name in _FLOATS:
            kwargs[name] = float(value)
        elif name in _BOOLS:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"{name} must be true or false, got {value!r}")
            kwargs[name] = value.lower() in ("true", "1")
        else:
            raise ValueError(f"unknown cassandra:// option {name!r}")
    return kwargs
