"""In-process subscribers: adapters, bridges and sinks consume like MQTT clients.

A ``LocalSubscription`` is a router target with the same semantics as a client's
session: QoS is downgraded to the granted QoS, the retain flag follows the
subscription's retain-as-published option, retained messages arrive on subscribe.
With ``no_local``, a message whose origin is the subscriber's own (same protocol and
name) is skipped before it is queued: it takes no place and is not counted. Messages
wait in a bounded queue read with ``async for``; on overflow the oldest
(``drop_oldest``, default) or the arriving (``drop_new``) message is dropped and counted
in ``dropped`` (and reported as ``local_queue_full`` to the observer of drops, named
by the subscriber's origin name).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from broker_core.context import Context, Origin
from broker_core.mqtt.limits import DROP_NEW, DROP_OLDEST
from broker_core.mqtt.observer import UNOBSERVED, MessageObserver

__all__ = ["LocalSubscription", "LocalTarget"]


class LocalTarget:
    """What every in-process router target shares (``LocalSubscription``, ``Tap``): an
    identity, its filters, no local by origin, the downgrade to the granted QoS, and
    ``close()`` unsubscribing everything."""

    def __init__(
        self,
        origin: Origin,
        no_local: bool,
        unsubscribe_all: Callable[[Any], None] | None,
    ) -> None:
        self.origin = origin
        self.no_local = no_local
        self.filters: list[str] = []
        self.delivered = 0
        self.closed = False
        self._unsubscribe_all = unsubscribe_all

    @property
    def online(self) -> bool:
        return not self.closed

    def admit(self, context: Context, qos: int, retain: bool) -> Context | None:
        """The Context to hand over (QoS and retain as granted), or None: closed, or
        the subscriber's own message under no local."""
        if self.closed:
            return None
        if self.no_local:
            origin = context.origin
            own = self.origin
            if origin is own or (origin.name == own.name and origin.protocol == own.protocol):
                return None
        if context.qos != qos or context.retain != retain:
            context = replace(context, qos=qos, retain=retain)
        self.delivered += 1
        return context

    def close(self) -> None:
        """Unsubscribes everything; nothing is delivered any more."""
        if self.closed:
            return
        self.closed = True
        if self._unsubscribe_all is not None:
            self._unsubscribe_all(self)


class LocalSubscription(LocalTarget):
    """A local consumer; iterate it for Contexts, or pass ``on_message`` to be called."""

    def __init__(
        self,
        origin: Origin,
        maxsize: int = 10_000,
        overflow: str = DROP_OLDEST,
        on_message: Callable[[Context], None] | None = None,
        unsubscribe_all: Callable[[LocalSubscription], None] | None = None,
        no_local: bool = False,
        observer: MessageObserver = UNOBSERVED,
    ) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        if overflow not in (DROP_OLDEST, DROP_NEW):
            raise ValueError(f"unknown overflow policy {overflow!r}")
        super().__init__(origin, no_local, unsubscribe_all)
        self.maxsize = maxsize
        self.overflow = overflow
        self.dropped = 0
        self.observer = observer
        self._on_message = on_message
        self._queue: deque[Context] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        admitted = self.admit(context, qos, retain)
        if admitted is None:
            return
        if self._on_message is not None:
            self._on_message(admitted)
            return
        queue = self._queue
        if len(queue) >= self.maxsize:
            self.dropped += 1
            drop_new = self.overflow == DROP_NEW
            lost = admitted if drop_new else queue.popleft()
            if self.observer.message_dropped:
                self.observer.report_dropped(
                    lost, "local_queue_full", self.origin.name, self.origin.username, now
                )
            if drop_new:
                return
        queue.append(admitted)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Context:
        while not self._queue:
            if self.closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._queue.popleft()

    def get_nowait(self) -> Context | None:
        return self._queue.popleft() if self._queue else None

    def __aiter__(self) -> LocalSubscription:
        return self

    async def __anext__(self) -> Context:
        return await self.get()

    def close(self) -> None:
        """Unsubscribes everything; a waiting reader ends its iteration."""
        super().close()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
