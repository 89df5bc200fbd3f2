"""The loopback adapter: subscribes through the hub and republishes.

The worked example of docs/adapters.md, "Writing a component": a component class built
from its config, ``run(hub, host)`` subscribing, calling ``host.ready()``, and serving
until it is cancelled; ``stats()`` adds its own counters to the API and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import logging

from adapters.failures import Unexpected
from adapters.loopback.codec import CompiledMapping, republish
from adapters.loopback.config import LoopbackAdapterConfig
from gateway.components import Host
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError

__all__ = ["LoopbackAdapter"]

log = logging.getLogger(__name__)
_unexpected = Unexpected(log)


class LoopbackAdapter:
    def __init__(self, config: LoopbackAdapterConfig) -> None:
        self.config = config
        self.mappings = [CompiledMapping(m) for m in config.mappings]
        self.republished = 0
        self.failed = 0

    async def run(self, hub: HubClient, host: Host) -> None:
        subscriptions = [
            hub.subscribe(m.source.topic_filter, qos=m.config.qos, maxsize=self.config.queue_size)
            for m in self.mappings
        ]
        host.ready()
        async with asyncio.TaskGroup() as tg:
            for mapping, subscription in zip(self.mappings, subscriptions, strict=True):
                tg.create_task(self._pump(hub, mapping, subscription))

    def stats(self) -> dict[str, int]:
        return {"republished": self.republished, "failed": self.failed}

    def _note_failure(self, exc: MappingError) -> None:
        """Counts a message that did not fit its mapping; logs the 1st, 2nd, 4th, 8th,
        ... (as the socket adapters do), so that a stream of bad messages cannot flood
        the log."""
        self.failed += 1
        failed = self.failed
        if failed & (failed - 1) == 0:
            log.warning("loopback %s: %s (%d such messages so far)", self.config.name, exc, failed)

    async def _pump(
        self, hub: HubClient, mapping: CompiledMapping, subscription: HubSubscription
    ) -> None:
        async for context in subscription:
            try:
                out = republish(mapping, context, hub.origin)
                if out is None:
                    continue
                accepted = hub.publish(out)  # refused: counted in the hub's `denied`
            except MappingError as exc:
                self._note_failure(exc)
                continue
            except Exception as exc:  # a bug: this message is lost, the adapter goes on
                self.failed += 1
                _unexpected(exc, "loopback %s: a message failed unexpectedly; dropped",
                            self.config.name)  # fmt: skip
                continue
            if accepted:
                self.republished += 1
