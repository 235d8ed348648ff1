"""CQL protocol errors the server answers with (code, message and the code's extra fields)."""

from __future__ import annotations

import io

from cassandra.protocol import write_short, write_string

__all__ = [
    "CqlError",
    "ServerFault",
    "ProtocolViolation",
    "CqlSyntaxError",
    "InvalidRequest",
    "ConfigurationError",
    "AlreadyExists",
    "Unprepared",
]


class CqlError(Exception):
    """An ERROR response: ``code`` and message, plus ``extra()`` bytes for codes that carry more."""

    code = 0x0000

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def extra(self) -> bytes:
        return b""


class ServerFault(CqlError):
    """0x0000: a bug in the server (never a client mistake)."""

    code = 0x0000


class ProtocolViolation(CqlError):
    """0x000A: a malformed or unsupported frame."""

    code = 0x000A


class CqlSyntaxError(CqlError):
    """0x2000: text the parser does not accept (including valid CQL outside the supported subset)."""

    code = 0x2000


class InvalidRequest(CqlError):
    """0x2200: a well-formed statement that cannot run (unknown table, bad restrictions, bad value)."""

    code = 0x2200


class ConfigurationError(CqlError):
    """0x2300: a DDL problem."""

    code = 0x2300


class AlreadyExists(ConfigurationError):
    """0x2400: CREATE without IF NOT EXISTS of something that exists."""

    code = 0x2400

    def __init__(self, keyspace: str, table: str = "") -> None:
        what = f"table {keyspace}.{table}" if table else f"keyspace {keyspace}"
        super().__init__(f"Cannot add already existing {what}")
        self.keyspace, self.table = keyspace, table

    def extra(self) -> bytes:
        f = io.BytesIO()
        write_string(f, self.keyspace)
        write_string(f, self.table)
        return f.getvalue()


class Unprepared(CqlError):
    """0x2500: EXECUTE of an id the server does not know; the driver then prepares again."""

    code = 0x2500

    def __init__(self, query_id: bytes) -> None:
        super().__init__(f"Prepared query with ID {query_id.hex()} not found")
        self.query_id = query_id

    def extra(self) -> bytes:
        f = io.BytesIO()
        write_short(f, len(self.query_id))
        f.write(self.query_id)
        return f.getvalue()
