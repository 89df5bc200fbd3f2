"""The Hub: what adapters, bridges and sinks see of the broker.

Each adapter (bridge, sink) instance gets a ``HubClient`` with its own identity, an
``Origin`` such as ``Origin("zmq", "factory-floor")``. Through it, it publishes
Contexts (``publish``) and consumes them (``subscribe``, an async iterator), under the
same ACL as MQTT clients: an ACL rule's ``clientid: <type>:<name>`` (``zmq:factory-floor``)
or ``username: <type>:<name>`` matches the instance, never an MQTT client.

Every subscription has a bounded queue (``maxsize``, default 10 000) with an overflow
policy: ``drop_oldest`` (default) or ``drop_new``; drops are counted per client
(``HubClient.dropped``) and shown in the metrics. A client never receives its own
messages back (no local, by origin), so an adapter that maps topics both ways cannot
loop a message through itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from broker_core.acl import PUBLISH, SUBSCRIBE
from broker_core.broker import Broker
from broker_core.context import Context, Origin
from broker_core.errors import AdapterError
from broker_core.local import LocalSubscription
from broker_core.mqtt.limits import DROP_OLDEST

__all__ = ["Hub", "HubClient", "HubSubscription"]

log = logging.getLogger(__name__)


class HubSubscription:
    """Contexts matching some filters, as an async iterator over a bounded queue."""

    def __init__(self, local: LocalSubscription, origin: Origin) -> None:
        self._local = local
        self._origin = origin

    @property
    def filters(self) -> list[str]:
        return list(self._local.filters)

    @property
    def dropped(self) -> int:
        return self._local.dropped

    @property
    def depth(self) -> int:
        return len(self._local)

    def __aiter__(self) -> AsyncIterator[Context]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Context]:
        local = self._local
        name = self._origin.name
        protocol = self._origin.protocol
        while True:
            try:
                context = await local.get()
            except StopAsyncIteration:
                return
            origin = context.origin
            if origin.name == name and origin.protocol == protocol:
                continue  # no local: never hand a client its own message back
            yield context

    async def get(self) -> Context:
        async for context in self:
            return context
        raise StopAsyncIteration

    def close(self) -> None:
        self._local.close()

    def __enter__(self) -> HubSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HubClient:
    """One adapter / bridge / sink instance's view of the hub."""

    def __init__(self, hub: Hub, origin: Origin) -> None:
        self.hub = hub
        self.origin = origin
        self.published = 0
        self.denied = 0
        self._subscriptions: list[HubSubscription] = []

    @property
    def dropped(self) -> int:
        return sum(s.dropped for s in self._subscriptions)

    @property
    def queue_depth(self) -> int:
        return sum(s.depth for s in self._subscriptions)

    def context(
        self, topic: str, payload: bytes, qos: int = 0, retain: bool = False, **kw: Any
    ) -> Context:
        """A new Context from this client (origin set)."""
        return Context(topic, payload, qos, retain, origin=self.origin, **kw)

    def publish(self, context: Context) -> bool:
        """Routes ``context`` like an MQTT PUBLISH; False when the ACL denied it."""
        origin = context.origin
        if origin is not self.origin and (
            origin.protocol != self.origin.protocol or origin.name != self.origin.name
        ):
            context = replace(context, origin=self.origin)  # an adapter may set its peer
        acl = self.hub.broker.acl
        if acl is not None and not acl.allows(self.origin, PUBLISH, context.topic):
            self.denied += 1
            self.hub.broker.counters.publish_denied += 1
            return False
        self.published += 1
        self.hub.broker.counters.messages_received += 1
        self.hub.broker.publish(context)
        return True

    def subscribe(
        self,
        *filters: str,
        qos: int = 2,
        maxsize: int = 10_000,
        overflow: str = DROP_OLDEST,
        retained: bool = True,
    ) -> HubSubscription:
        """Subscribes to ``filters``; iterate the result for Contexts.

        Raises ``AdapterError`` when the ACL denies one of the filters.
        """
        acl = self.hub.broker.acl
        if acl is not None:
            for topic_filter in filters:
                if not acl.allows(self.origin, SUBSCRIBE, topic_filter):
                    raise AdapterError(
                        f"{self.origin.protocol} {self.origin.name!r}: the ACL denies "
                        f"subscribing to {topic_filter!r}"
                    )
        local = self.hub.broker.subscribe(
            self.origin,
            filters,
            qos,
            no_local=False,
            retain_as_published=True,
            send_retained=retained,
            maxsize=maxsize,
            overflow=overflow,
        )
        subscription = HubSubscription(local, self.origin)
        self._subscriptions.append(subscription)
        return subscription

    def close(self) -> None:
        """Ends every subscription of this client (its iterators stop)."""
        for subscription in self._subscriptions:
            subscription.close()
        self._subscriptions.clear()

    def stats(self) -> dict[str, int]:
        return {
            "published": self.published,
            "denied": self.denied,
            "dropped": self.dropped,
            "queue_depth": self.queue_depth,
        }


class Hub:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def client(self, protocol: str, name: str) -> HubClient:
        """A client with the identity ``Origin(protocol, name)``."""
        return HubClient(self, Origin(protocol, name, None, f"{protocol}:{name}"))
