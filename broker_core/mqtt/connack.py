"""An MQTT 5 CONNACK within the client's Maximum Packet Size (MQTT 5.0 3.1.2.11.4).

The server MUST NOT send a packet larger than the client's Maximum Packet Size
[MQTT-3.1.2-24], and leaves out a Reason String or User Properties that would make it
larger (3.2.2.3.9, 3.2.2.3.10). ``fitted_connack`` is called only when the full CONNACK
does not fit (``Session.accept`` compares its length once): it drops the optional
properties one at a time, in ``OPTIONAL_ORDER``, until the packet fits.

Only what withholds a feature or a courtesy is left out: the reason string and user
properties, response information and server reference, the Topic Alias Maximum
(absent: the client sends no aliases), the availability of wildcard, subscription
identifier and shared subscriptions (absent: such a SUBSCRIBE is refused with a reason
code, the connection stays).

Never left out: the limits whose absence would tell the client it may send what the
server ends the connection for (Receive Maximum, absent: 65535, and the DISCONNECT 0x93
for using it; Maximum Packet Size; Retain Available; Maximum QoS), the Assigned Client
Identifier (the client cannot know its id otherwise), the Session Expiry Interval and
Server Keep Alive the server imposes (the client would keep the wrong keep alive, or
believe in a longer session), and the authentication method and data of enhanced
authentication. When even that minimal CONNACK does not fit, there is none:
``fitted_connack`` returns None and the caller closes the connection without a CONNACK,
as mosquitto does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import Connack
from broker_core.mqtt.properties import Properties

__all__ = ["OPTIONAL_ORDER", "fitted_connack"]

#: The optional CONNACK properties, the first left out first (None: absent).
OPTIONAL_ORDER: tuple[str, ...] = (
    "reason_string",
    "user_properties",
    "response_information",
    "server_reference",
    "topic_alias_maximum",
    "wildcard_subscription_available",
    "subscription_identifier_available",
    "shared_subscription_available",
)


def fitted_connack(
    session_present: bool, reason_code: int, props: Properties, limit: int
) -> bytes | None:
    """The CONNACK with as many of ``props``'s optional properties as fit in ``limit``
    bytes, dropped in ``OPTIONAL_ORDER``; None when not even the minimal one fits."""
    for name in OPTIONAL_ORDER:
        value = getattr(props, name)
        if value is None or value == ():
            continue
        absent: dict[str, Any] = {name: () if name == "user_properties" else None}
        props = replace(props, **absent)
        data = encode(Connack(session_present, reason_code, props), 5)
        if len(data) <= limit:
            return data
    data = encode(Connack(session_present, reason_code, props), 5)
    return data if len(data) <= limit else None
