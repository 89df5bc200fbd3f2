"""In-process subscribers: adapters, bridges and sinks consume like MQTT clients.

A ``LocalSubscription`` is a router target with the same semantics as a client's
session: QoS is downgraded to the granted QoS, the retain flag follows the
subscription's retain-as-published option, retained messages arrive on subscribe.
With ``no_local``, a message whose origin is the subscriber's own (same protocol and
name) is skipped before it is queued: it takes no place and is not counted. Messages
wait in a bounded queue read with ``async for``; on overflow the oldest
(``drop_oldest``, default) or the arriving (``drop_new``) message is dropped and counted
in ``dropped``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from broker_core.context import Context, Origin
from broker_core.mqtt.limits import DROP_NEW, DROP_OLDEST

__all__ = ["LocalSubscription"]


class LocalSubscription:
    """A local consumer; iterate it for Contexts, or pass ``on_message`` to be called."""

    def __init__(
        self,
        origin: Origin,
        maxsize: int = 10_000,
        overflow: str = DROP_OLDEST,
        on_message: Callable[[Context], None] | None = None,
        unsubscribe_all: Callable[[LocalSubscription], None] | None = None,
        no_local: bool = False,
    ) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        if overflow not in (DROP_OLDEST, DROP_NEW):
            raise ValueError(f"unknown overflow policy {overflow!r}")
        self.origin = origin
        self.maxsize = maxsize
        self.overflow = overflow
        self.no_local = no_local
        self.dropped = 0
        self.delivered = 0
        self.filters: list[str] = []
        self._on_message = on_message
        self._queue: deque[Context] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._unsubscribe_all = unsubscribe_all

    @property
    def online(self) -> bool:
        return not self._closed

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
        if self._closed:
            return
        if self.no_local:
            origin = context.origin
            own = self.origin
            if origin is own or (origin.name == own.name and origin.protocol == own.protocol):
                return
        if context.qos != qos or context.retain != retain:
            context = replace(context, qos=qos, retain=retain)
        self.delivered += 1
        if self._on_message is not None:
            self._on_message(context)
            return
        queue = self._queue
        if len(queue) >= self.maxsize:
            self.dropped += 1
            if self.overflow == DROP_NEW:
                return
            queue.popleft()
        queue.append(context)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Context:
        while not self._queue:
            if self._closed:
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
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe_all is not None:
            self._unsubscribe_all(self)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
