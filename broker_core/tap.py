"""Taps: in-process subscribers called synchronously while a message is routed.

A ``Tap`` is a router target like a ``LocalSubscription``, but instead of queueing it
calls ``callback(context)`` at once, during ``Broker.publish``, before the publisher's
PUBACK / PUBREC is decided. A bridge queue or the stream log appends the message to
its own store there; when the tap is *durable* that store is a participant of the
broker's acknowledgements (``broker_core.acks``), so the publisher is acknowledged only
once the message is in it.

QoS and retain follow the subscription like a session's (downgraded to the tap's QoS,
retain as published); ``no_local`` skips messages whose origin is the tap's own
(protocol and name), so a bridge never taps what it published itself. A callback that
raises is counted in ``errors`` and logged; routing goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from broker_core.acks import Durable
from broker_core.context import Context, Origin

__all__ = ["Tap"]

log = logging.getLogger(__name__)


class Tap:
    """A synchronous router target; see the module docstring."""

    __slots__ = (
        "_unsubscribe_all",
        "callback",
        "closed",
        "delivered",
        "durable",
        "errors",
        "filters",
        "no_local",
        "origin",
    )

    def __init__(
        self,
        origin: Origin,
        callback: Callable[[Context], None],
        durable: Durable | None = None,
        no_local: bool = True,
        unsubscribe_all: Callable[[Tap], None] | None = None,
    ) -> None:
        self.origin = origin
        self.callback = callback
        self.durable = durable
        self.no_local = no_local
        self.filters: list[str] = []
        self.delivered = 0
        self.errors = 0
        self.closed = False
        self._unsubscribe_all = unsubscribe_all

    @property
    def online(self) -> bool:
        return not self.closed

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        if self.closed:
            return
        if self.no_local:
            origin = context.origin
            own = self.origin
            if origin is own or (origin.name == own.name and origin.protocol == own.protocol):
                return
        if context.qos != qos or context.retain != retain:
            context = replace(context, qos=qos, retain=retain)
        self.delivered += 1
        try:
            self.callback(context)
        except Exception:
            self.errors += 1
            if self.errors == 1 or self.errors % 1000 == 0:
                log.exception(
                    "tap of %s:%s failed on %r (%d failures so far)",
                    self.origin.protocol,
                    self.origin.name,
                    context.topic,
                    self.errors,
                )

    def close(self) -> None:
        """Unsubscribes everything; the callback is not called any more."""
        if self.closed:
            return
        self.closed = True
        if self._unsubscribe_all is not None:
            self._unsubscribe_all(self)
