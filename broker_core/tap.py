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
from broker_core.local import LocalTarget

__all__ = ["Tap"]

log = logging.getLogger(__name__)


class Tap(LocalTarget):
    """A synchronous router target; see the module docstring."""

    def __init__(
        self,
        origin: Origin,
        callback: Callable[[Context], None],
        durable: Durable | None = None,
        no_local: bool = True,
        unsubscribe_all: Callable[[Tap], None] | None = None,
    ) -> None:
        super().__init__(origin, no_local, unsubscribe_all)
        self.callback = callback
        self.durable = durable
        self.errors = 0

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        # LocalTarget.admit, inline: a call less per message and tap
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
