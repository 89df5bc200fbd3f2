"""Which connect-side sockets have no peer: the adapter's ``degraded`` reason.

ZeroMQ and NNG reconnect by themselves; the adapter only reports. A mapping whose
socket connects (dials) and has lost its peer, or never reached it, makes the adapter
``degraded`` with the reason naming the mapping; once every such mapping has a peer
again the adapter is ``running``. Bind-side sockets waiting for peers are normal.
"""

from __future__ import annotations

from gateway.components import Host

__all__ = ["PeerWatch"]


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
