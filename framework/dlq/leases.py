"""Leases on uploaded segments: one command at a time changes a segment, whatever host it runs on.

A lease is the object ``leases/<segment object name>`` holding its holder and its expiry
time. It is taken by creating that object only if absent; a lease past its expiry is taken
over by replacing the expired version (``If-Match`` on its ETag), so a host that died holding
one blocks the others only until it expires. The holder renews its leases (replacing its own
version) every third of their length while it works, and deletes them when done. Expiries are
minutes long so that clock skew between hosts does not matter.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from stores.objects.error_map import ChangedObjectError, ObjectStoreError
from stores.objects.store import ObjectStore

__all__ = ["Lease", "Busy", "Leases", "Held", "LEASES", "DEFAULT_LEASE_S"]

log = logging.getLogger("framework.dlq")

LEASES = "leases/"
DEFAULT_LEASE_S = 300.0


@dataclass(frozen=True)
class Lease:
    """A lease held on segment ``name`` until ``expires_at``; ``etag`` is its stored version."""

    name: str
    holder: str
    expires_at: float
    etag: str


@dataclass(frozen=True)
class Busy:
    """A segment whose lease another holder has until ``expires_at``."""

    name: str
    holder: str
    expires_at: float


def holder_id() -> str:
    """This process's lease holder name: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Leases:
    """Taking, renewing and giving back leases under ``leases/`` of an object store."""

    def __init__(
        self,
        objects: ObjectStore,
        *,
        holder: str | None = None,
        length_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.objects = objects
        self.holder = holder or holder_id()
        self.length_s = length_s
        self.clock = clock

    @staticmethod
    def key(name: str) -> str:
        """The lease object of segment ``name``."""
        return f"{LEASES}{name}"

    def _body(self, until: float) -> bytes:
        return json.dumps({"holder": self.holder, "expires_at": until}).encode()

    def acquire(self, name: str) -> Lease | Busy:
        """Take the lease on ``name``: the ``Lease``, or ``Busy`` naming the live holder."""
        until = self.clock() + self.length_s
        try:
            info = self.objects.put(self.key(name), self._body(until), if_absent=True)
            return Lease(name, self.holder, until, info.etag)
        except FileExistsError:
            pass
        try:
            data, etag = self.objects.read(self.key(name))
        except FileNotFoundError:  # released meanwhile: try once more
            return self._create_or_busy(name, until)
        holder, expires = _parse(data)
        if expires > self.clock():
            return Busy(name, holder, expires)
        try:  # expired: take it over, unless another taker got there first
            info = self.objects.put(self.key(name), self._body(until), if_match=etag)
        except ChangedObjectError:
            return Busy(name, "another taker", until)
        log.warning("dead-letter lease on %s taken over from %s (expired at %.0f)", name, holder, expires)
        return Lease(name, self.holder, until, info.etag)

    def _create_or_busy(self, name: str, until: float) -> Lease | Busy:
        try:
            info = self.objects.put(self.key(name), self._body(until), if_absent=True)
        except FileExistsError:
            return Busy(name, "another taker", until)
        return Lease(name, self.holder, until, info.etag)

    def renew(self, lease: Lease) -> Lease:
        """Extend ``lease``; ``ChangedObjectError`` when it was taken over (it had expired)."""
        until = self.clock() + self.length_s
        info = self.objects.put(self.key(lease.name), self._body(until), if_match=lease.etag)
        return Lease(lease.name, self.holder, until, info.etag)

    def release(self, lease: Lease) -> None:
        """Give ``lease`` back (nothing happens when it was taken over meanwhile)."""
        try:
            self.objects.delete(self.key(lease.name), if_match=lease.etag)
        except ChangedObjectError:
            log.warning("dead-letter lease on %s was taken over before it was released", lease.name)

    @contextmanager
    def hold(self, names: Iterable[str]) -> Iterator[Held]:
        """Take the leases on ``names``, renew them in a thread while the block runs, release them after."""
        held = Held()
        try:
            for name in names:
                got = self.acquire(name)
                if isinstance(got, Lease):
                    held.leases[name] = got
                else:
                    held.busy.append(got)
            keeper = threading.Thread(
                target=self._keep, args=(held,), name="converge-dlq-leases", daemon=True
            )
            keeper.start()
            try:
                yield held
            finally:
                held.done.set()
                keeper.join()
        finally:
            for lease in held.leases.values():
                try:
                    self.release(lease)
                except ObjectStoreError as exc:  # it expires on its own
                    log.warning("dead-letter lease on %s not released: %s", lease.name, exc)

    def _keep(self, held: Held) -> None:
        while not held.done.wait(self.length_s / 3):
            for name, lease in list(held.leases.items()):
                try:
                    held.leases[name] = self.renew(lease)
                except ChangedObjectError:
                    log.error("dead-letter lease on %s was lost (taken over after it expired)", name)
                    held.lost.add(name)
                    del held.leases[name]
                except ObjectStoreError as exc:  # retried at the next turn, while the lease lasts
                    log.warning("dead-letter lease on %s not renewed: %s", name, exc)


@dataclass
class Held:
    """The leases taken by ``Leases.hold``, the segments others hold, and leases lost while held."""

    leases: dict[str, Lease] = field(default_factory=dict)
    busy: list[Busy] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)


def _parse(data: bytes) -> tuple[str, float]:
    """Holder and expiry of a lease object; an unreadable one counts as expired."""
    try:
        obj = json.loads(data)
        return str(obj["holder"]), float(obj["expires_at"])
    except (ValueError, TypeError, KeyError):
        return "unreadable lease", 0.0
