"""A message a bridge refuses while its queue cannot be opened is refused whole
(docs/bridges.md, "While the queue cannot be opened, what it would take is refused").

A real gateway (SQLite store) with a bridge whose ``queue.db`` is not a database: every
run fails, a ``Refusal`` taps the ``forwards`` in its place. A persistent MQTT 5
publisher on a socket, a QoS 2 subscriber of the same topics on another.

- QoS 2: each send (then each resend with DUP, same packet id) is refused with
  DISCONNECT 0x80, never a PUBREC: the packet id is not recorded as received. Before,
  the first refusal left it recorded, and the resend got PUBREC and PUBCOMP 0x00 though
  the bridge never had the message (acknowledged and lost).
- QoS 1 and QoS 2: a refused message reaches no local subscriber (before, each resend
  was delivered again: a QoS 2 duplicate per retry).
- Once the queue opens (the file moved away), the resend is accepted: PUBREC, PUBCOMP,
  one delivery, one row in the bridge's queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import free_port
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.api.support import KEY
from tests.integration.bridge.support import wait_until
from tests.integration.components.support import http_of

SESSION = {"session_expiry_interval": 3600}


def _config(port: int) -> str:
    return f"""
api: {{keys: ['{KEY}']}}
persistence: sqlite
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    client_id: gw-refusal-whole
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    restart_backoff: 100ms
    restart_backoff_max: 200ms
    forwards:
      - {{local: "fwd/#", remote: "cloud/fwd", qos: 2}}
"""


def _bridge(gw: RunningGateway) -> dict[str, Any]:
    reply = http_of(gw).get("/api/v1/bridges/cloud")
    assert reply.status == 200, reply.text
    found: dict[str, Any] = reply.json()
    return found


def _publisher(gw: RunningGateway, first: bool) -> RawClient:
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.do_connect("rw-pub", proto_ver=5, clean_session=first, properties=SESSION)
    return client


def _answer(client: RawClient) -> mb.Packet:
    """The broker's answer to a PUBLISH: PUBACK, PUBREC or DISCONNECT."""
    return client.wait_for(
        lambda p: p.type in (mb.PacketType.PUBACK, mb.PacketType.PUBREC, mb.PacketType.DISCONNECT),
        what="PUBACK, PUBREC or DISCONNECT",
    )


def test_a_refused_message_is_refused_whole_until_the_queue_opens(tmp_path: Path) -> None:
    queue = tmp_path / "data" / "bridge" / "cloud" / "queue.db"
    queue.parent.mkdir(parents=True)
    queue.write_bytes(b"this is not a database" * 300)
    with running_gateway(tmp_path, _config(free_port())) as gw:
        wait_until(lambda: _bridge(gw)["state"], lambda s: s == "backing_off")
        sub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        sub.do_connect("rw-sub", proto_ver=5, clean_session=True)
        sub.subscribe("fwd/#", 2)

        for attempt in range(3):
            pub = _publisher(gw, first=attempt == 0)
            pub.send(mb.gen_publish("fwd/x", "X", qos=2, dup=attempt > 0, mid=1, proto_ver=5))
            answer = _answer(pub)
            assert (answer.type, answer.reason_code) == (mb.PacketType.DISCONNECT, 0x80), (
                f"attempt {attempt + 1}: {answer!r}"
            )
            pub.close()
        pub = _publisher(gw, first=False)
        pub.send(mb.gen_publish("fwd/y", "Y", qos=1, mid=2, proto_ver=5))
        answer = _answer(pub)
        assert (answer.type, answer.reason_code) == (mb.PacketType.DISCONNECT, 0x80)
        pub.close()
        # Refused before routing: the subscriber got none of them (a bounded absence
        # check; the refusals above were answered, so routing is over).
        sub.expect_no_packet()
        assert _bridge(gw)["stats"]["refused_no_queue"] == 4

        # The queue opens: the resend is taken, acknowledged, delivered once.
        queue.rename(tmp_path / "queue.db.bad")
        wait_until(lambda: _bridge(gw)["stats"], lambda s: "queue_depth" in s)
        pub = _publisher(gw, first=False)
        pub.send(mb.gen_publish("fwd/x", "X", qos=2, dup=True, mid=1, proto_ver=5))
        pubrec = _answer(pub)
        assert (pubrec.type, pubrec.reason_code or 0) == (mb.PacketType.PUBREC, 0)
        pub.send(mb.gen_pubrel(1, proto_ver=5))
        pubcomp = pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, what="PUBCOMP")
        assert (pubcomp.reason_code or 0) == 0
        pub.disconnect()
        delivered = sub.recv_publish()
        assert (delivered.topic, delivered.payload) == ("fwd/x", b"X")
        sub.expect_no_packet()
        assert _bridge(gw)["stats"]["queue_depth"] == 1
        sub.disconnect()
