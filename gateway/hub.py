"""The Hub: what adapters, bridges and sinks see of the broker.

Each component instance gets a ``HubClient`` with its own identity, an ``Origin`` such
as ``Origin("zmq", "factory-floor")``. Through it, it

- publishes Contexts (``publish``), through the broker's one publish policy, the one an
  MQTT client's PUBLISH goes through (``Broker.publish_checked``): ``$delayed/``, the
  ``$SYS`` refusal, the ACL, counters. First the topic must be a valid topic name
  (``topic_name_problem``: what the MQTT decoder guarantees of a client's PUBLISH), as
  a template may render anything: an invalid one is refused (0x90), counted and logged.
  A message whose PUBLISH would exceed ``mqtt.max_packet_size`` (``publish_size``: the
  whole MQTT 5.0 packet, topic, payload and properties, as the broker counts a client's)
  is refused as an MQTT client could not publish it (``on_safe`` gets 0x83, a PUBACK's
  code: 0x95 Packet too large is a DISCONNECT's): counted in the client's
  ``too_large`` (a dropped count of its own in the metrics) and in the broker's
  ``messages.dropped.too_large``, and logged at a bounded
  rate. A payload well under the limit without properties costs one comparison and an
  identity check (``Hub.payload_unchecked``).
  With ``on_safe`` (or ``await publish_safe``) it learns when the message is durable,
  after the same barriers a PUBACK waits for: a bridge acknowledges its remote broker
  only then;
- consumes Contexts (``subscribe``, an async iterator over a bounded queue);
- taps Contexts (``tap``): a synchronous callback during routing, before the
  publisher's PUBACK; with ``durable=`` the component's own store takes part in the
  acknowledgement, so "acknowledged" means "in that store" (``broker_core.tap``);
- hooks every message (``hook``): the cheapest way to see all of them, a message hook
  of the broker's observers (``broker_core.observe``: called with the Context where
  ``message.publish`` is emitted, before routing, no event object, no topic matching;
  filter in batches later), with ``durable=`` as for a tap (the stream log records
  every message this way).

The ACL applies as to MQTT clients: an ACL rule's ``clientid: <protocol>:<name>``
(``zmq:factory-floor``) or ``username: <protocol>:<name>`` matches the instance, never
an MQTT client.

Every subscription has a bounded queue (``maxsize``, default 10 000) with an overflow
policy: ``drop_oldest`` (default) or ``drop_new``; drops are counted per client
(``HubClient.dropped``) and shown in the metrics. When a run of the component ends and
another follows, its subscriptions are parked, still subscribed (``park``), and the next
run's ``subscribe`` to the same filters takes one over with what it queued meanwhile;
the supervisor closes the rest (``release_parked``), counting what they held as dropped
(``handover_dropped``). A client never receives its own
messages back (no local, by origin, checked before a message is queued), so an adapter
that maps topics both ways cannot loop a message through itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from broker_core.acks import Durable
from broker_core.acl import SUBSCRIBE
from broker_core.broker import Broker
from broker_core.clock import BASE as _CLOCK_BASE
from broker_core.clock import monotonic as _monotonic
from broker_core.context import Context, Origin
from broker_core.errors import AdapterError
from broker_core.local import LocalSubscription
from broker_core.lograte import RateLimitedLog
from broker_core.mqtt.limits import DROP_OLDEST
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.mqtt.properties import EMPTY
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.topics import SHARE_PREFIX, abbreviate, too_deep, topic_name_problem
from broker_core.tap import Tap

__all__ = ["Hub", "HubClient", "HubHook", "HubSubscription", "publish_size"]

log = logging.getLogger(__name__)

_TOPIC_NAME_INVALID = int(ReasonCode.TOPIC_NAME_INVALID)
#: what a refusal for size tells ``on_safe``: a PUBACK's reason code (a bridge sends it to
#: its remote broker), "the PUBLISH is valid but the receiver is not willing to accept it"
_TOO_LARGE = int(ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR)

#: The most a PUBLISH without properties adds to its payload: fixed header (1 byte and a
#: 4-byte Remaining Length), the topic (2 + at most 65535 bytes), a packet id (2), the
#: empty properties' length (1).
_MOST_BESIDES_PAYLOAD = 1 + 4 + 2 + 65535 + 2 + 1


def _varint_length(value: int) -> int:
    return 1 if value < 0x80 else 2 if value < 0x4000 else 3 if value < 0x200000 else 4


def publish_size(context: Context) -> int:
    """The size of ``context``'s MQTT 5.0 PUBLISH packet, as the broker's decoder counts
    a client's against ``mqtt.max_packet_size`` (MQTT 5.0 3.3: fixed header, topic name,
    packet id at QoS 1 and 2, properties, payload)."""
    topic = context.topic
    props = context.properties
    block = 1 if props is EMPTY else len(props.encoded())  # with its length's varint
    body = (2 + (len(topic) if topic.isascii() else len(topic.encode("utf-8")))
            + (2 if context.qos else 0) + block + len(context.payload))
    return 1 + _varint_length(body) + body

# Why the broker refused a publish, by reason code (``HubClient.refusal``).
_REFUSALS = {
    int(ReasonCode.NOT_AUTHORIZED): "not authorized (the ACL, or a $SYS topic)",
    _TOPIC_NAME_INVALID: "topic name invalid (a $delayed/ topic, or more levels than"
    " mqtt.max_topic_levels)",
    int(ReasonCode.QUOTA_EXCEEDED): "quota exceeded (retained or delayed messages)",
}


class HubSubscription:
    """Contexts matching some filters, as an async iterator over a bounded queue.

    ``add(*filters)`` and ``remove(*filters)`` change its filters while it runs (a
    ZeroMQ XPUB's subscribers come and go); a message matching several of them is
    delivered once.
    """

    def __init__(
        self,
        local: LocalSubscription,
        origin: Origin,
        client: HubClient | None = None,
        qos: int = 2,
        retained: bool = True,
    ) -> None:
        self._local = local
        self._origin = origin
        self._client = client
        self._qos = qos
        self._retained = retained

    @property
    def filters(self) -> list[str]:
        return list(self._local.filters)

    @property
    def dropped(self) -> int:
        return self._local.dropped

    @property
    def depth(self) -> int:
        return len(self._local)

    def add(self, *filters: str) -> None:
        """Subscribes to more filters (retained messages of each arrive as on
        ``subscribe``). Raises ``AdapterError`` when the ACL denies one of them."""
        if self._client is None:
            raise AdapterError("this subscription cannot change its filters")
        self._client.check_subscribe(filters)
        broker = self._client.hub.broker
        broker.add_local_filters(self._local, filters, self._qos, send_retained=self._retained)

    def remove(self, *filters: str) -> None:
        """Unsubscribes from some of the filters; what is queued already stays."""
        if self._client is not None:
            self._client.hub.broker.remove_local_filters(self._local, filters)

    def __aiter__(self) -> AsyncIterator[Context]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Context]:
        local = self._local
        while True:
            try:
                yield await local.get()
            except StopAsyncIteration:
                return

    async def get(self) -> Context:
        async for context in self:
            return context
        raise StopAsyncIteration

    def get_nowait(self) -> Context | None:
        """The next queued Context without waiting, or None when none is queued (a
        consumer that woke up for one message takes the others queued behind it)."""
        return self._local.get_nowait()

    def close(self) -> None:
        self._local.close()

    def __enter__(self) -> HubSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HubHook:
    """A hook of one client (``HubClient.hook``): a message hook of the broker's
    observers (``Observers.hook_messages``); ``close()`` removes it."""

    def __init__(
        self, broker: Broker, callback: Callable[[Context], None], durable: Durable | None
    ) -> None:
        self._broker = broker
        self.callback = callback
        self.durable = durable
        self.closed = False
        self._undo = broker.observers.hook_messages(callback)
        if durable is not None:
            broker.acks.add(durable)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._undo()
        if self.durable is not None:
            self._broker.acks.remove(self.durable)


class HubClient:
    """One component instance's view of the hub; it outlives the instance's restarts."""

    def __init__(self, hub: Hub, origin: Origin) -> None:
        self.hub = hub
        self.origin = origin
        # Its protocol shows in the broker's "received" counts from 0 on (Broker.stats()).
        hub.broker.counters.received_from.setdefault(origin.protocol, 0)
        self.published = 0
        self.denied = 0
        #: why the last refused publish was refused ("" until one is), and whether that
        #: was its size (``mqtt.max_packet_size``: a drop, not a denial)
        self.refusal = ""
        self.refused_too_large = False
        self._dropped_before = 0  # by subscriptions already closed
        #: publishes refused because their PUBLISH would exceed mqtt.max_packet_size
        self.too_large = 0
        self._tapped_before = 0
        self._tap_errors_before = 0
        self._subscriptions: list[HubSubscription] = []
        #: subscriptions of a run that ended, still routed to, for the next run to take
        #: over (``park``, ``subscribe``); closed by ``release_parked``
        self._parked: list[HubSubscription] = []
        #: messages queued for a run that no run took over (``release_parked``)
        self.handover_dropped = 0
        self._taps: list[Tap] = []
        self._hooks: list[HubHook] = []

    @property
    def dropped(self) -> int:
        return (
            self._dropped_before
            + sum(s.dropped for s in self._subscriptions)
            + sum(s.dropped for s in self._parked)
        )

    @property
    def queue_depth(self) -> int:
        return sum(s.depth for s in self._subscriptions) + sum(s.depth for s in self._parked)

    def context(
        self, topic: str, payload: bytes, qos: int = 0, retain: bool = False, **kw: Any
    ) -> Context:
        """A new Context from this client (origin set)."""
        return Context(topic, payload, qos, retain, origin=self.origin, **kw)

    def publish(self, context: Context, on_safe: Callable[[int], None] | None = None) -> bool:
        """Publishes ``context`` like an MQTT PUBLISH; False when it was refused (an
        invalid topic name, larger than ``mqtt.max_packet_size``, the ACL, ``$SYS``, an
        invalid or over-quota ``$delayed/``), then ``refusal`` says why.

        ``on_safe(reason_code)`` is called on the loop once the message is durable (the
        broker's store and every durable tap's store committed it), in publish order:
        ``0`` Success or ``0x10`` No matching subscribers; a refusal's code (``0x87``,
        ``0x83`` too large, ``0x90``, ``0x97``) at once; ``0x80`` when a store failed to
        write it.
        """
        origin = context.origin
        if origin is not self.origin and (
            origin.protocol != self.origin.protocol or origin.name != self.origin.name
        ):
            context = replace(context, origin=self.origin)  # an adapter may set its peer
        hub = self.hub
        broker = hub.broker
        self.published += 1
        broker.counters.count_received(self.origin.protocol)
        now = _CLOCK_BASE + _monotonic()  # broker_core.clock, inline (per message)
        problem = topic_name_problem(context.topic)
        if problem is None:
            if (len(context.payload) > hub.payload_unchecked
                    or context.properties is not EMPTY) and self._too_large(context, now):
                if on_safe is not None:
                    on_safe(_TOO_LARGE)
                return False
            code = broker.publish_checked(context, self.origin, None, now)
        else:
            # Before the retained store and routing: no session can be sent this topic.
            code = _TOPIC_NAME_INVALID
            broker.counters.publish_denied += 1
            self.hub.refusal_log.warning(
                now, "%s %r: publish to %s refused: %s",
                self.origin.protocol, self.origin.name, abbreviate(context.topic), problem,
            )  # fmt: skip
        if code >= 0x80:
            self.denied += 1
            self.refused_too_large = False
            self.refusal = (
                _REFUSALS.get(code, f"reason code 0x{code:02x}")
                if problem is None
                else f"topic name invalid: {problem}"
            )
            if on_safe is not None:
                on_safe(code)
            return False
        if on_safe is not None:
            broker.acks.after(
                self, lambda ok: on_safe(code if ok else ReasonCode.UNSPECIFIED_ERROR)
            )
        return True

    def _too_large(self, context: Context, now: float) -> bool:
        """Refuses ``context`` when its PUBLISH would exceed ``mqtt.max_packet_size``:
        counted in ``too_large`` (and in the broker's ``messages.dropped.too_large``, as
        its ``packet_size`` limit hit), logged."""
        limit = self.hub.max_packet_size
        size = publish_size(context)
        if size <= limit:
            return False
        self.too_large += 1
        self.refused_too_large = True
        self.refusal = f"packet too large: {size} bytes, mqtt.max_packet_size is {limit}"
        counters = self.hub.broker.counters
        counters.hit("packet_size")
        counters.dropped_too_large += 1  # the broker's messages.dropped.too_large
        self.hub.refusal_log.warning(
            now, "%s %r: publish to %s dropped: its PUBLISH would be %d bytes, more than "
            "mqtt.max_packet_size (%d)",
            self.origin.protocol, self.origin.name, abbreviate(context.topic), size, limit,
        )  # fmt: skip
        return True

    async def publish_safe(self, context: Context) -> int:
        """Publishes ``context`` and returns once it is durable: the reason code of
        ``publish``'s ``on_safe``."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def safe(code: int) -> None:
            if not done.done():
                done.set_result(code)

        self.publish(context, safe)
        return await done

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

        A subscription of the previous run with the same filters that is still parked
        (``park``) is taken over instead, with what it queued meanwhile (and no retained
        messages again: it never lapsed); a different ``qos`` replaces its granted QoS
        from then on (what it queued keeps the QoS it was queued with), as an MQTT
        SUBSCRIBE replaces a subscription.
        """
        try:
            self.check_subscribe(filters)
        except AdapterError:
            self.release_parked()  # the ACL changed: nothing of it is taken over
            raise
        if self._parked and filters:
            wanted = frozenset(filters)
            for parked in self._parked:
                local = parked._local
                if frozenset(local.filters) == wanted and not local.closed:
                    self._parked.remove(parked)
                    local.maxsize = maxsize
                    local.overflow = overflow
                    if parked._qos != qos:  # replaced, as an MQTT SUBSCRIBE replaces one
                        options = SubscriptionOptions(qos, True, True)
                        for topic_filter in local.filters:
                            self.hub.broker.router.subscribe(local, topic_filter, options)
                    subscription = HubSubscription(local, self.origin, self, qos, retained)
                    self._subscriptions.append(subscription)
                    return subscription
        local = self.hub.broker.subscribe(
            self.origin,
            filters,
            qos,
            no_local=True,
            retain_as_published=True,
            send_retained=retained,
            maxsize=maxsize,
            overflow=overflow,
        )
        subscription = HubSubscription(local, self.origin, self, qos, retained)
        self._subscriptions.append(subscription)
        return subscription

    def tap(
        self,
        *filters: str,
        callback: Callable[[Context], None],
        qos: int = 2,
        durable: Durable | None = None,
        retained: bool = False,
    ) -> Tap:
        """Calls ``callback(context)`` for every message matching ``filters``, on the
        loop, while the message is routed: before its publisher is acknowledged.

        ``durable``: the store the callback appends to (``pending`` and
        ``barrier(callback)``, as ``broker_core.store.base.Store``); acknowledgements wait
        for it, so an acknowledged message is in it. ``retained``: retained messages
        are tapped on subscribe too. The callback must not block; one that raises is
        counted and logged. Raises ``AdapterError`` when the ACL denies a filter.
        """
        self.check_subscribe(filters)
        tap = self.hub.broker.tap(
            self.origin, filters, callback, qos, durable=durable, send_retained=retained
        )
        self._taps.append(tap)
        return tap

    def keep_open(self, kept: Tap | HubHook) -> None:
        """``kept`` (a tap or a hook) stays open when this run's taps and hooks close
        (``close()``): the component hands it to its next run (``Host.keep``), which
        takes it back with ``adopt``."""
        if isinstance(kept, HubHook):
            self._hooks.remove(kept)
        else:
            self._taps.remove(kept)

    def adopt(self, kept: Tap | HubHook) -> None:
        """A tap or hook that an earlier run kept open (``keep_open``) is this run's
        again: it is closed (and a tap counted) with the others."""
        if isinstance(kept, HubHook):
            self._hooks.append(kept)
        else:
            self._taps.append(kept)

    def hook(self, callback: Callable[[Context], None], durable: Durable | None = None) -> HubHook:
        """Calls ``callback(context)`` for every message the broker routes, on the loop,
        before it is routed and before its publisher is acknowledged.

        The cheapest way to see every message: one call per message with the Context
        itself (no event object), no topic matching, so ``callback`` can be a C function
        such as ``list.append`` and the component filters later, in batches. It sees
        the messages in publish order, as published (QoS and retain untouched), from
        every publisher (MQTT clients, components, the API, wills, delayed messages
        coming due, ``$SYS``), ``$SYS`` and other ``$`` topics included, this client's
        own included, before any ``message.publish`` observer. ``callback`` should not
        raise: an exception is counted and logged as an observer's
        (``edgebus_observer_errors_total``) and the message is routed.
        ``durable``: as for ``tap``. Raises ``AdapterError`` unless the ACL lets this
        client subscribe to ``#``.
        """
        self.check_subscribe(("#",))
        hook = HubHook(self.hub.broker, callback, durable)
        self._hooks.append(hook)
        return hook

    def denied_filters(self) -> list[str]:
        """The filters of this client's live subscriptions, taps and hooks (``#``) that
        the ACL denies now: what subscribing again would refuse (after a reload changed
        the ACL, ``Supervisor.rejudge``)."""
        acl = self.hub.broker.acl
        if acl is None:
            return []
        held = [f for subscription in self._subscriptions for f in subscription.filters]
        held += [f for tap in self._taps for f in tap.filters]
        if self._hooks:
            held.append("#")
        return [f for f in dict.fromkeys(held) if not acl.allows(self.origin, SUBSCRIBE, f)]

    def check_subscribe(self, filters: tuple[str, ...]) -> None:
        """Raises ``AdapterError`` unless every filter has at most ``mqtt.max_topic_levels``
        levels (as a client's SUBSCRIBE, counted in limit ``topic_levels``; configured
        filters are checked before they get here: ``gateway.config.models.topic_levels``)
        and the ACL lets this client subscribe to it (what ``subscribe``, ``tap`` and
        ``hook`` check first)."""
        broker = self.hub.broker
        max_levels = broker.limits.max_topic_levels
        for topic_filter in filters:
            inner = topic_filter
            if inner.startswith(SHARE_PREFIX):
                inner = inner[len(SHARE_PREFIX) :].partition("/")[2]
            if too_deep(inner, max_levels):
                broker.counters.hit("topic_levels")
                raise AdapterError(
                    f"{self.origin.protocol} {self.origin.name!r}: the filter"
                    f" {abbreviate(topic_filter)} has more than mqtt.max_topic_levels"
                    f" ({max_levels}) levels"
                )
        acl = broker.acl
        if acl is None:
            return
        for topic_filter in filters:
            if not acl.allows(self.origin, SUBSCRIBE, topic_filter):
                raise AdapterError(
                    f"{self.origin.protocol} {self.origin.name!r}: the ACL denies "
                    f"subscribing to {topic_filter!r}"
                )

    def park(self) -> None:
        """A run ended and another follows: its subscriptions stay subscribed and go on
        queueing (bounded, as before) for the next run, which takes each over by
        subscribing to the same filters (``subscribe``); its taps and hooks close, as
        with ``close``. What no run takes over is dropped and counted by
        ``release_parked``."""
        for subscription in self._subscriptions:
            if subscription._local.closed:  # the run closed it itself: nothing to hand over
                self._close_counted(subscription)
            else:
                self._parked.append(subscription)
        self._subscriptions.clear()
        self._close_taps_and_hooks()

    def release_parked(self) -> None:
        """Closes the parked subscriptions no run took over (the next run is up and did
        not subscribe to their filters, or no run follows); what they held is counted
        in ``dropped`` and ``handover_dropped``."""
        parked, self._parked = self._parked, []
        for subscription in parked:
            self._close_counted(subscription)

    def _close_counted(self, subscription: HubSubscription) -> None:
        left = subscription.depth
        self.handover_dropped += left
        self._dropped_before += subscription.dropped + left
        subscription.close()

    def close(self) -> None:
        """Ends every subscription, tap and hook of this client (its iterators stop),
        parked ones included (what they held counted as dropped); the client itself
        stays usable and keeps its counts."""
        for subscription in self._subscriptions:
            self._dropped_before += subscription.dropped
            subscription.close()
        self._subscriptions.clear()
        self.release_parked()
        self._close_taps_and_hooks()

    def _close_taps_and_hooks(self) -> None:
        for tap in self._taps:
            self._tapped_before += tap.delivered
            self._tap_errors_before += tap.errors
            tap.close()
        self._taps.clear()
        for hook in self._hooks:
            hook.close()
        self._hooks.clear()

    def stats(self) -> dict[str, int]:
        return {
            "published": self.published,
            "denied": self.denied,
            "dropped": self.dropped,
            "too_large": self.too_large,
            "queue_depth": self.queue_depth,
            "handover_dropped": self.handover_dropped,
            "tapped": self._tapped_before + sum(t.delivered for t in self._taps),
            "tap_errors": self._tap_errors_before + sum(t.errors for t in self._taps),
        }


class Hub:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # Topic names refused (a template's output): at a bounded rate, as a client can
        # make a rule or an adapter render one per message.
        self.refusal_log = RateLimitedLog(log)
        self.max_packet_size = broker.limits.max_packet_size
        #: a payload up to this size, without properties, cannot make a PUBLISH larger
        #: than max_packet_size whatever its topic: publish checks nothing more
        self.payload_unchecked = self.max_packet_size - _MOST_BESIDES_PAYLOAD

    def client(self, protocol: str, name: str) -> HubClient:
        """A client with the identity ``Origin(protocol, name)``."""
        return HubClient(self, Origin(protocol, name, None, f"{protocol}:{name}"))
