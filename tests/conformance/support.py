"""Shared helpers of the conformance tests: connection factory, expectations, deviations."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

__all__ = [
    "BOTH",
    "MALFORMED_OR_PROTOCOL",
    "Clients",
    "deviation",
    "expect_connect_refused",
    "known_deviation",
    "short_wait",
]

# Protocol levels most statements apply to: MQTT 3.1.1 and MQTT 5.0.
BOTH = pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])

# Where the specification leaves the choice between the two (4.13 Handling errors), a server's
# DISCONNECT / CONNACK may carry either.
MALFORMED_OR_PROTOCOL = {mb.ReasonCode.MALFORMED_PACKET, mb.ReasonCode.PROTOCOL_ERROR}


def short_wait() -> float:
    """The bounded wait used to check that something does NOT happen."""
    return unit(0.4)


def known_deviation(broker: BrokerHandle, reason: str) -> None:
    """Mark the running test as an expected failure for mosquitto only, never for edgebus."""
    if broker.name == "mosquitto":
        pytest.xfail(f"mosquitto 2.0.11 deviates: {reason}")


@contextlib.contextmanager
def deviation(broker: BrokerHandle, reason: str) -> Iterator[None]:
    """Around the assertion mosquitto is known to fail: xfail it for mosquitto when it fails
    (so a fixed mosquitto passes again), fail it for every other target."""
    try:
        yield
    except AssertionError:
        known_deviation(broker, reason)
        raise


class Clients:
    """Opens raw connections to one broker and closes them after the test."""

    def __init__(self, broker: BrokerHandle, uid: str) -> None:
        self.broker = broker
        self.uid = uid
        self._open: list[RawClient] = []
        self._count = itertools.count(1)

    def client_id(self, role: str = "c") -> str:
        """A fresh client identifier: alphanumeric, at most 23 characters (MQTT-3.1.3-5)."""
        return f"{role[:6]}{self.uid}n{next(self._count)}"

    def raw(self, proto: int = 4) -> RawClient:
        """A TCP connection with nothing sent yet."""
        client = RawClient(self.broker.host, self.broker.port, protocol_level=proto)
        self._open.append(client)
        return client

    def connect(
        self,
        proto: int = 4,
        client_id: str | None = None,
        *,
        clean: bool = True,
        session_present: bool | None = False,
        **connect_args: Any,
    ) -> RawClient:
        """A connected client (CONNACK success asserted, and its Session Present flag)."""
        client = self.raw(proto)
        cid = self.client_id() if client_id is None else client_id
        connack = client.do_connect(cid, proto_ver=proto, clean_session=clean, **connect_args)
        if session_present is not None:
            assert connack.session_present == session_present
        return client

    def subscriber(
        self, topic_filter: str | list[Any], qos: int = 0, proto: int = 4, **connect_args: Any
    ) -> RawClient:
        """A connected client subscribed to ``topic_filter`` (granted QoS asserted)."""
        client = self.connect(proto, **connect_args)
        suback = client.subscribe(topic_filter, qos)
        assert [code for code in suback.reason_codes if code >= 0x80] == []
        return client

    def check_alive(self, proto: int = 4) -> None:
        """The broker still serves: a fresh connection round-trips a PINGREQ."""
        client = self.connect(proto)
        client.ping()
        client.disconnect()

    def close_all(self) -> None:
        for client in self._open:
            client.close()
        self._open.clear()


def expect_connect_refused(
    client: RawClient,
    proto: int,
    v5_codes: set[int] | int | None = None,
    v311_codes: set[int] | int | None = None,
) -> mb.Packet | None:
    """The server refuses a CONNECT: it closes the connection, maybe after a CONNACK.

    A CONNACK, when sent, carries one of the allowed codes (MQTT 5: ``v5_codes``; 3.1.1:
    ``v311_codes``, and when those are None no CONNACK may be sent at all) and Session
    Present 0 (MQTT-3.2.2-4 / MQTT-3.2.2-6).
    """
    if proto >= 5:
        codes = v5_codes if v5_codes is not None else MALFORMED_OR_PROTOCOL
        final = client.expect_closed(reason_code=codes, packet_type=mb.PacketType.CONNACK)
    elif v311_codes is None:
        final = client.expect_closed(packet_type=None)
    else:
        final = client.expect_closed(reason_code=v311_codes, packet_type=mb.PacketType.CONNACK)
    if final is not None:
        assert final.session_present is False
    return final
