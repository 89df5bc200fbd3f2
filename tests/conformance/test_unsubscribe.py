"""UNSUBSCRIBE and UNSUBACK: MQTT 3.1.1 and 5.0 sections 3.10 and 3.11."""

from __future__ import annotations

from tests.conformance.support import BOTH, MALFORMED_OR_PROTOCOL, Clients, short_wait
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import PacketType, ReasonCode


@BOTH
def test_unsubscribe_reserved_flags_close_the_connection(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.10.1-1: UNSUBSCRIBE fixed-header flags MUST be 0010; others close the
    connection (5.0: Malformed Packet)."""
    client = clients.connect(proto)
    client.send(mb.gen_unsubscribe(1, f"{root}/t", proto_ver=proto, flags=0x00))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)


@BOTH
def test_unsubscribe_without_topic_filters_closes_the_connection(
    clients: Clients, proto: int
) -> None:
    """MQTT-3.10.3-2: the payload MUST contain at least one Topic Filter; an UNSUBSCRIBE
    without one is a protocol violation."""
    client = clients.connect(proto)
    client.send(mb.gen_unsubscribe(1, [], proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
def test_unsubscribe_packet_identifier_0_closes_the_connection(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-2.3.1-1 (3.1.1) / MQTT-2.2.1-3 (5.0): UNSUBSCRIBE MUST carry a non-zero Packet
    Identifier."""
    client = clients.connect(proto)
    client.send(mb.gen_unsubscribe(0, f"{root}/t", proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
def test_unsubscribe_stops_delivery(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.10.4-2/-4/-5 (3.1.1 and 5.0): the Server answers with an UNSUBACK of the same
    Packet Identifier (MQTT-2.3.1-7 (3.1.1) / MQTT-2.2.1-6 (5.0)) and stops adding new
    messages for the deleted subscription."""
    topic = f"{root}/u"
    subscriber = clients.subscriber(topic, 1, proto)
    unsuback = subscriber.unsubscribe(topic, mid=0x0102)
    assert unsuback.packet_id == 0x0102
    if proto == 5:
        assert unsuback.reason_codes == [ReasonCode.SUCCESS]
    else:
        assert unsuback.raw == mb.gen_unsuback(0x0102)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x", qos=1)
    subscriber.expect_no_packet(short_wait())


@BOTH
def test_unsuback_even_without_a_subscription(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.10.4-5: even when no subscription is deleted the Server MUST respond with an
    UNSUBACK; MQTT-3.11.3-2 (5.0): with Reason Code 0x11 (No subscription existed) or
    another UNSUBACK code."""
    client = clients.connect(proto)
    unsuback = client.unsubscribe(f"{root}/never")
    if proto == 5:
        assert unsuback.reason_codes == [ReasonCode.NO_SUBSCRIPTION_EXISTED]


@BOTH
def test_unsubscribe_compares_filters_character_by_character(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.10.4-1: UNSUBSCRIBE filters are compared character by character with the
    subscriptions' filters; 'a/b' does not delete 'a/+'."""
    subscriber = clients.subscriber(f"{root}/+", 1, proto)
    unsuback = subscriber.unsubscribe(f"{root}/b")
    if proto == 5:
        assert unsuback.reason_codes == [ReasonCode.NO_SUBSCRIPTION_EXISTED]
    publisher = clients.connect(proto)
    publisher.publish(f"{root}/b", b"still subscribed", qos=1)
    assert subscriber.recv_publish().payload == b"still subscribed"


@BOTH
def test_unsubscribe_with_several_filters(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.10.4-6: several filters are handled as a sequence of UNSUBSCRIBEs answered by one
    UNSUBACK; MQTT-3.11.3-1/-2 (5.0): one Reason Code per filter, in order."""
    subscriber = clients.connect(proto)
    subscriber.subscribe([(f"{root}/a", 1), (f"{root}/c", 1)])
    unsuback = subscriber.unsubscribe([f"{root}/a", f"{root}/b", f"{root}/c"])
    if proto == 5:
        assert unsuback.reason_codes == [0x00, 0x11, 0x00]
    subscriber.expect_no_packet(short_wait() / 2)
    publisher = clients.connect(proto)
    publisher.publish(f"{root}/a", b"x", qos=1)
    publisher.publish(f"{root}/c", b"x", qos=1)
    subscriber.expect_no_packet(short_wait())


@BOTH
def test_unsubscribe_completes_inflight_delivery(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.10.4-3: after UNSUBSCRIBE the Server completes the delivery of QoS 1 and 2
    messages it started to send (here the PUBREL of a QoS 2 flow)."""
    topic = f"{root}/inflight"
    subscriber = clients.subscriber(topic, 2, proto)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x", qos=2)
    message = subscriber.recv_publish(ack=False)
    subscriber.unsubscribe(topic)
    subscriber.send(mb.gen_pubrec(message.packet_id or 0, proto_ver=proto))
    subscriber.expect_packet(PacketType.PUBREL, packet_id=message.packet_id)
    subscriber.send(mb.gen_pubcomp(message.packet_id or 0, proto_ver=proto))
    subscriber.ping()
