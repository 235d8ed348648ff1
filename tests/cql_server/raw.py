"""A bare protocol-v4 client over a socket: frames built and decoded by the driver's own message classes."""

from __future__ import annotations

import socket
import struct
from typing import Any

from cassandra.protocol import ProtocolHandler, StartupMessage

__all__ = ["RawConnection"]

_HEADER = struct.Struct(">BBhBi")


class RawConnection:
    """Send one request at a time and read its response (``version`` may be set to test refusals)."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=5.0)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, message: Any, stream: int = 1, version: int = 4) -> None:
        frame = ProtocolHandler.encode_message(message, stream, 4, None, False)
        self.sock.sendall(bytes([version]) + frame[1:])

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def receive(self) -> tuple[int, int, Any]:
        """(version byte, stream id, decoded message) of the next response frame."""
        version, flags, stream, opcode, length = _HEADER.unpack(self._read(_HEADER.size))
        body = self._read(length)
        msg = ProtocolHandler.decode_message(4, {}, stream, flags, opcode, body, None, None)
        return version, stream, msg

    def request(self, message: Any, stream: int = 1) -> Any:
        self.send(message, stream)
        _, got, msg = self.receive()
        assert got == stream
        return msg

    def startup(self) -> Any:
        return self.request(StartupMessage(cqlversion="3.4.5", options={}))

    def closed_by_peer(self) -> bool:
        """True when the server has closed the connection (no more bytes will come)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return True

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            data += chunk
        return data
