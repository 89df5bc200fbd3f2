"""Topic access control: may this origin publish to, or subscribe to, this topic?

The broker consults its ``Acl`` for every PUBLISH (wills included), every topic filter
of a SUBSCRIBE, and the in-process API used by adapters and bridges, which carry their
own ``Origin``. ``deny_action`` says what a denied MQTT client gets: ``ignore`` (v5:
PUBACK/SUBACK 0x87; 3.1.1: a positive ack for PUBLISH as [MQTT-3.3.5-2] allows, 0x80
in SUBACK) or ``disconnect`` (v5: DISCONNECT 0x87).
"""

from __future__ import annotations

from typing import Literal, Protocol

from broker_core.context import Origin

__all__ = ["DENY_DISCONNECT", "DENY_IGNORE", "PUBLISH", "SUBSCRIBE", "Acl", "Action", "AllowAll"]

Action = Literal["publish", "subscribe"]
PUBLISH: Action = "publish"
SUBSCRIBE: Action = "subscribe"
DENY_IGNORE = "ignore"
DENY_DISCONNECT = "disconnect"


class Acl(Protocol):
    def allows(self, origin: Origin, action: Action, topic: str) -> bool: ...


class AllowAll:
    def allows(self, origin: Origin, action: Action, topic: str) -> bool:
        return True
