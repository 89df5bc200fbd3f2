"""Which connect-side sockets have no peer: the adapter's ``degraded`` reason; and
``first_error``, which unwraps a failed task group for the supervisor.

ZeroMQ and NNG reconnect by themselves; the adapter only reports. A mapping whose
socket connects (dials) and has lost its peer, or never reached it, makes the adapter
``degraded`` with the reason naming the mapping; once every such mapping has a peer
again the adapter is ``running``. Bind-side sockets waiting for peers are normal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gateway.components import Host

__all__ = ["PeerWatch", "first_error"]


@contextlib.contextmanager
def first_error() -> Iterator[None]:
    """Raises the first error of a task group's ``ExceptionGroup`` itself (chained to
    the group), so that the supervisor's ``last_error`` names what went wrong."""
    try:
        yield
    except ExceptionGroup as group:
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        raise error from group


class PeerWatch:
    """Collects which mappings lack their peer; reports to the host once ``start`` ran
    (the adapter calls it, instead of ``host.ready()``, when its sockets are open)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._down: dict[str, str] = {}
        self._started = False

    def start(self) -> None:
        self._started = True
        self._report()

    def stop(self) -> None:
        """No more reports: the run ends (its sockets closing would look like peers
        going away, after the host may have started the next run)."""
        self._started = False

    def up(self, mapping: str) -> None:
        if self._down.pop(mapping, None) is not None:
            self._report()

    def down(self, mapping: str, why: str) -> None:
        if self._down.get(mapping) != why:
            self._down[mapping] = why
            self._report()

    def _report(self) -> None:
        if not self._started:
            return
        if self._down:
            self.host.degraded("; ".join(f"{m}: {w}" for m, w in sorted(self._down.items())))
        else:
            self.host.ready()
