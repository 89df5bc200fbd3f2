"""Sockets that have not sent CONNECT yet, per listener, oldest first.

They are bounded apart from ``max_connections``, which counts only clients that sent
CONNECT: sockets that say nothing cannot keep clients that speak MQTT out. When a
listener holds ``max_pending_connections`` such sockets, the oldest one with nothing
to read is closed to make room for the new one (and counted), so a flood of empty
sockets only shortens the time each of them may stay silent; a client that sends its
CONNECT right after connecting, as every client does, gets in. Sockets are also
closed when no CONNECT came within the connect timeout.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PendingSockets"]

T = TypeVar("T")

_SCAN = 64  # pending sockets looked at for one without input, oldest first


class PendingSockets(Generic[T]):
    def __init__(self) -> None:
        # listener name -> its pending sockets in arrival order (dicts keep insertion order)
        self._by_listener: dict[str, dict[T, None]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, listener: str, socket: T, bound: int, has_input: Callable[[T], bool]) -> T | None:
        """Registers ``socket``; returns the one to close when over ``bound``.

        That is the oldest socket with no bytes waiting to be read (``has_input``): a
        client whose CONNECT has arrived but not been read yet (sockets are accepted in
        batches) is passed over. Only the ``_SCAN`` oldest are looked at; when all of them
        have input, the oldest goes.
        """
        pending = self._by_listener.setdefault(listener, {})
        pending[socket] = None
        self._count += 1
        if len(pending) <= bound:
            return None
        victim = None
        for candidate in itertools.islice(pending, _SCAN):
            if candidate is not socket and not has_input(candidate):
                victim = candidate
                break
        if victim is None:
            victim = next(iter(pending))
        del pending[victim]
        self._count -= 1
        return victim

    def remove(self, listener: str, socket: T) -> bool:
        """Forgets ``socket`` (it sent CONNECT, or closed); False when it was not pending."""
        pending = self._by_listener.get(listener)
        if pending is None or socket not in pending:
            return False
        del pending[socket]
        self._count -= 1
        return True
