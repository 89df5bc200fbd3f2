"""A will a PUBLISH could not use refuses its CONNECT, over real sockets: one on a
``$SYS`` topic (always), and, with an ACL, one on a topic the client may not publish to.

MQTT 5 gets CONNACK 0x87 Not authorized, the code its PUBLISH to that topic would get
(``Broker.publish_checked``); MQTT 3.1.1 return code 5, Not authorized. Before, both
CONNECTs were accepted (0x00) and the will dropped without a word when it was due.
(mosquitto 2.0.11 does the latter still: it accepts such a CONNECT and drops the will.)
"""

from __future__ import annotations

import pytest

from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import Clients

NOT_AUTHORIZED = 0x87
V311_NOT_AUTHORIZED = 5

ACL = """\
acl:
  default: allow
  rules:
    - permission: allow
      username: admin
      topics: ["secret/#"]
    - permission: deny
      action: publish
      topics: ["secret/#"]
"""


def refused(clients: Clients, client_id: str, will_topic: str, username: str | None = None) -> None:
    """Both protocol levels are refused as Not authorized, and keep no session."""
    v5 = clients.raw(5)
    connack = v5.do_connect(client_id, proto_ver=5, will_topic=will_topic, will_payload=b"gone",
                            username=username, expect_code=NOT_AUTHORIZED)  # fmt: skip
    assert connack.session_present is False
    v5.expect_closed(packet_type=None)
    v311 = clients.raw(4)
    v311.do_connect(client_id + "-311", proto_ver=4, will_topic=will_topic, will_payload=b"gone",
                    username=username, expect_code=V311_NOT_AUTHORIZED)  # fmt: skip
    v311.expect_closed(packet_type=None)
    gw = clients.gw
    assert gw.call(lambda: gw.broker.sessions.get(client_id)) is None
    assert gw.call(lambda: gw.broker.sessions.get(client_id + "-311")) is None
    assert gw.call(lambda: gw.broker.stats().will_bytes) == 0


@pytest.mark.parametrize("will_topic", ["$SYS/broker/x", "$SYS", "$SYSx/y"])
def test_a_will_on_sys_refuses_the_connect(
    gw: RunningGateway, clients: Clients, will_topic: str
) -> None:
    # The broker's PUBLISH rule: a client publishing to a topic starting with $SYS gets
    # 0x87 (MQTT 4.7.2: $ topics belong to the server). Checked first, ACL or none.
    publisher = clients.raw_connect(5, "sys-publisher")
    ack = publisher.publish(will_topic, b"x", qos=1)
    assert ack is not None and ack.reason_code == NOT_AUTHORIZED
    refused(clients, "sys-will", will_topic)


@pytest.mark.gateway_config(ACL)
@pytest.mark.parametrize("will_topic", ["secret/x", "$delayed/5/secret/x"])
def test_a_will_the_acl_denies_refuses_the_connect(
    gw: RunningGateway, clients: Clients, will_topic: str
) -> None:
    # The same client's PUBLISH there: 0x87.
    publisher = clients.raw_connect(5, "acl-publisher")
    ack = publisher.publish(will_topic, b"x", qos=1)
    assert ack is not None and ack.reason_code == NOT_AUTHORIZED
    refused(clients, "acl-will", will_topic)
    refused(clients, "acl-will-user", will_topic, username="someone")


@pytest.mark.gateway_config(ACL)
def test_a_will_the_acl_allows_is_accepted_and_published(
    gw: RunningGateway, clients: Clients
) -> None:
    reader = clients.raw_connect(5, "reader", username="admin")
    assert reader.subscribe([("secret/#", 0), ("public/#", 0)]).reason_codes == [0, 0]
    for proto, client_id, topic, username in (
        (5, "admin-will", "secret/admin", "admin"),  # the rule for its username allows it
        (4, "admin-will-311", "secret/admin311", "admin"),
        (5, "public-will", "public/x", None),  # no rule: the default allows it
        (4, "public-will-311", "public/y", None),
    ):
        will = clients.raw(proto)
        will.do_connect(client_id, proto_ver=proto, will_topic=topic, will_payload=b"gone",
                        username=username)  # fmt: skip
        will.abort()
        received = reader.recv_publish()
        assert (received.topic, received.payload) == (topic, b"gone")
