"""``GatewayTargets``: what the bridge and stream actions may publish to.

The rule engine asks it, per result, whether a topic reaches the named bridge (one of
its ``forwards[].local`` filters matches) or the stream log (it runs, records
``stream.topics``, and takes messages from rules). It reads the supervisor's current
instances, so bridges added or changed through the API count at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.mqtt.topics import filter_matches
from gateway.components import BRIDGE, SINK, Supervisor

if TYPE_CHECKING:
    from gateway.config.models.stream import StreamConfig

__all__ = ["GatewayTargets"]

_UP = ("running", "degraded")  # a degraded bridge still queues (store-and-forward)


class GatewayTargets:
    def __init__(self, supervisor: Supervisor, stream: Callable[[], StreamConfig]) -> None:
        self.supervisor = supervisor
        self.stream = stream

    def bridge_forwards(self, name: str) -> tuple[str, ...] | None:
        for spec in self.supervisor.specs(BRIDGE):
            if spec.name == name:
                return tuple(forward.local for forward in spec.config.forwards)
        return None

    def stream_accepts(self, topic: str) -> str | None:
        config = self.stream()
        if not config.enabled:
            return "the stream log is not enabled (`stream.enabled`)"
        status = self.supervisor.status(SINK, "stream")
        if status is None or status["state"] not in _UP:
            state = "absent" if status is None else status["state"]
            return f"the stream log is not running ({state})"
        if not any(filter_matches(f, topic) for f in config.topics):
            return f"the stream log does not record {topic!r} (`stream.topics`)"
        if config.origins is not None and "rule" not in config.origins:
            return "the stream log does not record messages from rules (`stream.origins`)"
        return None
