"""A PUBLISH whose topic the broker cannot take: ``$share/...`` and deeper than
``mqtt.max_topic_levels``, per protocol version, over real sockets.

- ``$share/<group>/<filter>`` is the form of a shared subscription (MQTT 5.0 4.8.2): as a
  Topic Name no subscription could ever match it (a filter starting ``$share/`` is a
  shared one, matching the filter after the group), and $ topics are not for clients
  to exchange messages (4.7.2). An MQTT 5 publisher gets 0x90 Topic Name invalid
  (mosquitto 2.0.11 says 0x87 Not authorized: its ACL refuses ``$share``); was: accepted
  (0x10) and kept as a retained message nobody could receive.
- MQTT 3.1.1 and 3.1 have no reason codes: such a PUBLISH closes the connection, without
  PUBACK / PUBREC ([MQTT-3.3.5-2]: acknowledge or close), at every QoS. Was: PUBACK, and
  the message dropped, an acknowledged message lost (a topic deeper than
  ``max_topic_levels``), or kept (``$share/``). mosquitto 2.0.11 acknowledges a
  ``$share`` PUBLISH and drops it (its ACL refusal), and closes the connection for a
  topic it cannot take (more than 200 levels, a wildcard).
"""

from __future__ import annotations

from functools import partial

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import Clients, wait_until

PT = mb.PacketType
TOPIC_NAME_INVALID = 0x90
LEVELS = 128  # the default of mqtt.max_topic_levels


def deep(first: str, levels: int) -> str:
    return first + "/" * (levels - 1)


def hits(gw: RunningGateway, limit: str) -> int:
    return gw.call(lambda: gw.broker.counters.limit_hits.get(limit, 0))


def retained_topics(gw: RunningGateway) -> list[str]:
    return gw.call(lambda: sorted(c.topic for c in gw.broker.retained))


@pytest.mark.parametrize("topic", ["$share/g/x", "$share/g", "$share/"])
def test_an_mqtt5_publish_to_a_share_topic_is_refused_topic_name_invalid(
    gw: RunningGateway, clients: Clients, topic: str
) -> None:
    reader = clients.raw_connect(5, "share-reader")
    assert reader.subscribe([("$share/g/x", 2)]).reason_codes == [2]
    publisher = clients.raw_connect(5, "share-publisher")
    for qos in (1, 2):
        ack = publisher.publish(topic, b"q%d" % qos, qos=qos, retain=True)
        assert ack is not None
        assert (ack.type, ack.reason_code) == (PT.PUBACK if qos == 1 else PT.PUBREC,
                                               TOPIC_NAME_INVALID)  # fmt: skip
    publisher.publish(topic, b"q0", retain=True)  # QoS 0: nothing to say, dropped
    publisher.publish("x", b"after", qos=1)
    received = reader.recv_publish()  # what a publisher sends arrives in order
    assert (received.topic, received.payload) == ("x", b"after")
    reader.expect_no_packet()
    assert retained_topics(gw) == []
    publisher.ping()  # still connected


@pytest.mark.parametrize("proto", [3, 4], ids=["v31", "v311"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_an_mqtt311_publish_to_a_share_topic_closes_the_connection(
    gw: RunningGateway, clients: Clients, proto: int, qos: int
) -> None:
    reader = clients.raw_connect(5, "share-reader")
    assert reader.subscribe([("$share/g/x", 2), ("x", 2)]).reason_codes == [2, 2]
    publisher = clients.raw_connect(proto, "share-publisher")
    publisher.send(mb.gen_publish("$share/g/x", b"no", qos=qos, retain=True,
                                  mid=1 if qos else None, proto_ver=proto))  # fmt: skip
    publisher.expect_closed(packet_type=None)  # no PUBACK / PUBREC: not taken
    reader.expect_no_packet()
    assert retained_topics(gw) == []


@pytest.mark.parametrize("proto", [3, 4], ids=["v31", "v311"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_an_mqtt311_publish_deeper_than_max_topic_levels_closes_the_connection(
    gw: RunningGateway, clients: Clients, proto: int, qos: int
) -> None:
    reader = clients.raw_connect(5, "deep-reader")
    assert reader.subscribe([("#", 2)]).reason_codes == [2]
    publisher = clients.raw_connect(proto, "deep-publisher")
    ok = publisher.publish(deep("d", LEVELS), b"fits", qos=1, retain=True)
    assert ok is not None and ok.type == PT.PUBACK
    publisher.send(mb.gen_publish(deep("d", LEVELS + 1), b"deep", qos=qos, retain=True,
                                  mid=2 if qos else None, proto_ver=proto))  # fmt: skip
    publisher.expect_closed(packet_type=None)  # was: PUBACK, and the message dropped
    received = reader.recv_publish()
    assert (received.topic, received.payload) == (deep("d", LEVELS), b"fits")
    reader.expect_no_packet()
    assert retained_topics(gw) == [deep("d", LEVELS)]
    assert hits(gw, "topic_levels") == 1


def test_an_mqtt5_publish_deeper_than_max_topic_levels_is_refused_and_stays_connected(
    gw: RunningGateway, clients: Clients
) -> None:
    publisher = clients.raw_connect(5, "deep-v5")
    for qos in (1, 2):
        ack = publisher.publish(deep("d", LEVELS + 1), b"deep", qos=qos)
        assert ack is not None and ack.reason_code == TOPIC_NAME_INVALID
    publisher.ping()


@pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])
def test_a_will_on_a_share_topic_refuses_the_connect(
    gw: RunningGateway, clients: Clients, proto: int
) -> None:
    # As for any will topic a PUBLISH could not use (test_topic_bounds.py): 0x90, and
    # 3 Server unavailable for 3.1.1, which has no such code.
    refused = TOPIC_NAME_INVALID if proto == 5 else 3
    client = clients.raw(proto)
    client.do_connect("share-will", proto_ver=proto, will_topic="$share/g/w",
                      will_payload=b"gone", expect_code=refused)  # fmt: skip
    client.expect_closed(packet_type=None)
    assert gw.call(lambda: gw.broker.sessions.get("share-will")) is None


def test_a_component_publish_to_a_share_topic_is_refused(
    gw: RunningGateway, clients: Clients
) -> None:
    hub = gw.call(lambda: gw.gateway.hub.client("zmq", "share"))
    codes: list[int] = []
    context = hub.context("$share/g/x", b"1", 1, True)
    gw.call(partial(hub.publish, context, codes.append))
    wait_until(lambda: codes, what="the publish decided")
    assert codes == [TOPIC_NAME_INVALID]
    assert retained_topics(gw) == []
