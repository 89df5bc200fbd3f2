"""A Message Expiry Interval of 0 (MQTT 5.0 3.3.2.3.3).

Its lifetime has passed when it arrives, and a copy is deleted only if "the Server has
not managed to start onward delivery" [MQTT-3.3.2-5]: it goes to the subscribers whose
delivery starts at once (online, window open), with the interval 0 in the PUBLISH, and is
not queued for an offline session or behind a full window, nor retained.
"""

from __future__ import annotations

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import Clients, wait_until

PT = mb.PacketType
ZERO = {"message_expiry_interval": 0}


def _publish(
    pub: RawClient,
    topic: str,
    payload: bytes,
    mid: int,
    retain: bool = False,
    properties: dict[str, int] | None = None,
) -> None:
    """A QoS 1 PUBLISH from an MQTT 5 client, PUBACKed 0x00."""
    pub.send(
        mb.gen_publish(
            topic, payload, qos=1, retain=retain, mid=mid, proto_ver=5, properties=properties
        )
    )
    assert pub.expect_packet(PT.PUBACK, packet_id=mid).reason_code == 0


def test_an_online_subscriber_gets_it_with_interval_0(clients: Clients) -> None:
    v5 = clients.raw_connect(5)
    assert v5.subscribe("e0/t", 1).reason_codes == [1]
    v311 = clients.raw_connect(4)
    assert v311.subscribe("e0/t", 1).reason_codes == [1]
    pub = clients.raw_connect(5)
    _publish(pub, "e0/t", b"now", 1, properties=ZERO)
    got = v5.expect_packet(PT.PUBLISH)
    assert (got.payload, got.properties.get("message_expiry_interval")) == (b"now", 0)
    assert v311.expect_packet(PT.PUBLISH).payload == b"now"


def test_not_queued_for_an_offline_session(clients: Clients) -> None:
    session = {"session_expiry_interval": 60}
    sub = clients.raw_connect(5, "e0-off", clean_session=False, properties=session)
    assert sub.subscribe("e0/q", 1).reason_codes == [1]
    sub.disconnect()
    wait_until(lambda: clients.offline("e0-off"), what="e0-off offline")
    pub = clients.raw_connect(5)
    _publish(pub, "e0/q", b"zero", 1, properties=ZERO)
    _publish(pub, "e0/q", b"kept", 2)
    again = clients.raw_connect(5, "e0-off", clean_session=False, properties=session)
    assert again.recv_publish().payload == b"kept"  # "zero" was not held for it
    again.expect_no_packet()


def test_not_held_behind_a_full_window(clients: Clients, gw: RunningGateway) -> None:
    sub = clients.raw_connect(5, properties={"receive_maximum": 1})
    assert sub.subscribe("e0/w", 1).reason_codes == [1]
    pub = clients.raw_connect(5)
    _publish(pub, "e0/w", b"first", 1)
    first = sub.expect_packet(PT.PUBLISH)  # in flight: the window (1) is full
    assert first.payload == b"first"
    _publish(pub, "e0/w", b"zero", 2, properties=ZERO)
    _publish(pub, "e0/w", b"queued", 3)
    assert first.packet_id is not None
    sub.send(mb.gen_puback(first.packet_id, proto_ver=5))
    assert sub.recv_publish().payload == b"queued"
    sub.expect_no_packet()
    assert gw.call(lambda: gw.broker.counters.dropped_expired) == 1


def test_retained_it_is_delivered_and_leaves_no_retained_message(
    clients: Clients, gw: RunningGateway
) -> None:
    live = clients.raw_connect(5)
    assert live.subscribe("e0/r", 1).reason_codes == [1]
    pub = clients.raw_connect(5)
    _publish(pub, "e0/r", b"old", 1, retain=True)
    assert live.recv_publish().payload == b"old"
    _publish(pub, "e0/r", b"zero", 2, retain=True, properties=ZERO)
    got = live.recv_publish()
    assert (got.payload, got.properties.get("message_expiry_interval")) == (b"zero", 0)
    # It replaced "old" and expired at once: the topic has no retained message.
    assert gw.call(lambda: gw.broker.retained.get("e0/r")) is None
    late = clients.raw_connect(5)
    assert late.subscribe("e0/#", 1).reason_codes == [1]
    late.expect_no_packet()


def test_a_delayed_one_is_not_delivered_after_its_delay(
    clients: Clients, gw: RunningGateway
) -> None:
    """Through ``$delayed/`` it waits in the server, so its lifetime has passed before
    any delivery starts: dropped as expired when due, never sent (before: delivered after
    the delay with an interval of 1, more than the 0 received [MQTT-3.3.2-6]). A retained
    one still replaces the topic's retained message when due, and leaves none."""
    sub = clients.raw_connect(5)
    assert sub.subscribe("e0/d/#", 1).reason_codes == [1]
    pub = clients.raw_connect(5)
    _publish(pub, "e0/d/r", b"old", 1, retain=True)
    assert sub.recv_publish().payload == b"old"
    _publish(pub, "$delayed/1/e0/d/x", b"zero", 2, properties=ZERO)
    _publish(pub, "$delayed/1/e0/d/r", b"zero", 3, retain=True, properties=ZERO)
    wait_until(lambda: gw.call(lambda: len(gw.broker.delayed)) == 0, what="both due")
    _publish(pub, "e0/d/x", b"after", 4)
    assert sub.recv_publish().payload == b"after"  # nothing came before it
    assert gw.call(lambda: gw.broker.retained.get("e0/d/r")) is None
    assert gw.call(lambda: gw.broker.counters.dropped_expired) == 2
