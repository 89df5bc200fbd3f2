"""``Origin``: where a message came from (part of the ``Context`` envelope).

Its own module, free of any clock, so that the sans-I/O ``mqtt`` package can name a
client without importing the envelope (``broker_core.context`` stamps messages with
the wall clock).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.mqtt.fastinit import frozen_factory

__all__ = ["Origin", "new_origin"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message came from.

    ``protocol`` is one of ``mqtt``, ``dds``, ``ros2``, ``zmq``, ``nng``, ``someip``,
    ``bridge``, ``rule``, ``api``, ``sys``; ``name`` the client id or adapter/bridge
    instance; ``peer`` the remote address when there is one.
    """

    protocol: str
    name: str
    peer: str | None = None
    username: str | None = None


# Every field positionally, fast (two per MQTT connection: see fastinit).
new_origin = frozen_factory(Origin)
