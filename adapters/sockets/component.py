"""``SocketAdapter``: what the ZeroMQ and NNG adapter classes share as components.

The compiled mappings (``inbound``, ``outbound``), the outbound subscriptions and what
``stop()`` and ``stats()`` make of them, the ipc files bound (removed at the end of a
run: neither library does it), and the reply side of a front for an MQTT responder
(``serve_front``). Each adapter subclasses it and adds its sockets and ``run``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

from adapters.sockets.config import InboundMapping, OutboundMapping
from adapters.sockets.mapping import Inbound, Outbound, mapping_names
from adapters.sockets.requests import PendingReplies, collect_replies, default_response_topic
from gateway.hub import HubClient, HubSubscription

__all__ = ["SocketAdapter"]


class SocketAdapter:
    #: The adapter type (``zmq``, ``nng``), for names of mappings and reply topics.
    TYPE: ClassVar[str] = ""

    def __init__(
        self,
        name: str,
        queue_size: int,
        inbound: tuple[InboundMapping, ...],
        outbound: tuple[OutboundMapping, ...],
    ) -> None:
        self.name = name
        self.queue_size = queue_size
        names = mapping_names(f"{self.TYPE}_to_mqtt", inbound)
        self.inbound = [Inbound(c, n) for c, n in zip(inbound, names, strict=True)]
        names = mapping_names(f"mqtt_to_{self.TYPE}", outbound)
        self.outbound = [Outbound(c, n) for c, n in zip(outbound, names, strict=True)]
        self._subscriptions: dict[str, HubSubscription] = {}
        self._ipc_files: list[Path] = []

    async def stop(self) -> None:
        """Drains the outbound queues into the sockets (the supervisor bounds the wait)."""
        while any(s.depth for s in self._subscriptions.values()):
            await asyncio.sleep(0.01)

    def stats(self) -> dict[str, int]:
        """Every mapping's counters as ``<mapping>.<counter>``; an outbound mapping's
        ``dropped`` includes its subscription queue's drops."""
        out: dict[str, int] = {}
        for inbound in self.inbound:
            out.update(inbound.counters.stats(inbound.name))
        for outbound in self.outbound:
            subscription = self._subscriptions.get(outbound.name)
            dropped = subscription.dropped if subscription is not None else 0
            out.update(outbound.counters.stats(outbound.name, dropped))
        return out

    def subscribe(self, hub: HubClient, mapping: Outbound, *filters: str) -> HubSubscription:
        """The mapping's subscription (``filters``, by default its ``from_mqtt``), with
        the adapter's ``queue_size``, counted in ``stats()``."""
        subscription = hub.subscribe(
            *(filters or (mapping.source.topic_filter,)),
            qos=mapping.config.qos,
            maxsize=self.queue_size,
        )
        self._subscriptions[mapping.name] = subscription
        return subscription

    def subscribe_on_demand(self, hub: HubClient, mapping: Outbound) -> HubSubscription:
        """A subscription of the mapping with no filter yet (``add`` them later)."""
        subscription = hub.subscribe(qos=mapping.config.qos, maxsize=self.queue_size)
        self._subscriptions[mapping.name] = subscription
        return subscription

    def bound(self, url: str) -> None:
        """Notes a URL a socket bound (listened on): an ipc file to remove at the end."""
        if url.startswith("ipc://"):
            self._ipc_files.append(Path(url[len("ipc://") :]))

    def remove_ipc_files(self) -> None:
        for path in self._ipc_files:
            with contextlib.suppress(OSError):
                if path.is_socket():
                    path.unlink()

    async def serve_front(
        self,
        hub: HubClient,
        mapping: Inbound,
        serve: Callable[[PendingReplies, str], Awaitable[None]],
    ) -> None:
        """Runs ``serve(pending, response_topic)``, a front's loop over native requests,
        while the replies of the MQTT responder are collected for it."""
        response_topic = mapping.config.response_topic or default_response_topic(
            self.TYPE, self.name, mapping.name
        )
        pending = PendingReplies(mapping.config.max_inflight)
        replies = hub.subscribe(response_topic, qos=1, retained=False)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(collect_replies(replies, pending))
                await serve(pending, response_topic)
        finally:
            pending.close()
