"""QoS 2 across SIGKILL: an acknowledgement of the QoS 2 flow goes out only once what it
changed is committed (docs/broker.md, "Persistence").

- PUBCOMP frees the packet id for the publisher's next message. Sent before the removal
  of the id from "awaiting PUBREL" was committed, a kill brought the id back, and the
  next message reusing it, resent with DUP after the restart, was taken for a
  duplicate: PUBREC and PUBCOMP, never routed (lost).
- PUBREL tells the subscriber the broker will never send the PUBLISH again. Sent before
  the ``released`` mark was committed, a kill made the restarted broker resend the
  PUBLISH (DUP) of a message already past PUBREC: a QoS 2 duplicate (MQTT 5.0 4.3.3).

Each kill is made on a wire event (the PUBCOMP or the PUBREL just read), so a trial
catches the uncommitted write whenever the writer thread has not committed it yet:
before the fix most of the ten trials did.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

SESSION = {"session_expiry_interval": 3600}
PERSISTENCE = "persistence: sqlite"
TRIALS = 10


def connect(broker: BrokerHandle, client_id: str, clean: bool) -> RawClient:
    client = RawClient(broker.host, broker.port, protocol_level=5)
    client.do_connect(client_id, proto_ver=5, clean_session=clean, properties=SESSION)
    return client


def kill(broker: BrokerHandle) -> None:
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(unit(10))
    broker.stop()  # closes its log files


def pubrec_then_pubcomp(client: RawClient, mid: int) -> tuple[mb.Packet, mb.Packet]:
    pubrec = client.wait_for(lambda p: p.type == mb.PacketType.PUBREC, what="PUBREC")
    client.send(mb.gen_pubrel(mid, proto_ver=5))
    pubcomp = client.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, what="PUBCOMP")
    return pubrec, pubcomp


@pytest.mark.timeout(180)
def test_a_packet_id_freed_by_pubcomp_stays_free_across_sigkill(tmp_path: Path) -> None:
    """A (id 1) completes, B reuses id 1 at once, kill; B resent with DUP is routed."""
    broker = start_edgebus(tmp_path, PERSISTENCE)
    sub = connect(broker, "q2k-sub", clean=True)
    sub.subscribe("q2k/#", 2)
    sub.disconnect()
    for trial in range(TRIALS):
        pub = connect(broker, "q2k-pub", clean=trial == 0)
        pub.send(mb.gen_publish("q2k/x", f"A{trial}", qos=2, mid=1, proto_ver=5))
        pubrec, pubcomp = pubrec_then_pubcomp(pub, 1)
        assert (pubrec.reason_code or 0, pubcomp.reason_code or 0) == (0, 0)
        pub.send(mb.gen_publish("q2k/x", f"B{trial}", qos=2, mid=1, proto_ver=5))
        kill(broker)  # B's PUBREC never came: the client must send B again
        pub.close()
        broker = start_edgebus(tmp_path, PERSISTENCE)
        pub = connect(broker, "q2k-pub", clean=False)
        assert pub.connack is not None and pub.connack.session_present
        pub.send(mb.gen_publish("q2k/x", f"B{trial}", qos=2, dup=True, mid=1, proto_ver=5))
        pubrec, pubcomp = pubrec_then_pubcomp(pub, 1)
        assert (pubrec.reason_code or 0, pubcomp.reason_code or 0) == (0, 0)
        pub.disconnect()
    try:
        expected = [f"{x}{t}" for t in range(TRIALS) for x in "AB"]
        sub = connect(broker, "q2k-sub", clean=False)
        received: list[str] = []
        awaiting: set[int] = set()  # an exactly-once receiver: ids between PUBREC and PUBREL
        while not set(expected) <= set(received):
            try:
                packet = sub.wait_for(
                    lambda p: p.type in (mb.PacketType.PUBLISH, mb.PacketType.PUBREL),
                    unit(10),
                    "PUBLISH",
                )
            except AssertionError:
                break  # what did not come is named below
            mid = packet.packet_id or 0
            if packet.type == mb.PacketType.PUBLISH:
                if mid not in awaiting:
                    received.append(packet.payload.decode())
                    awaiting.add(mid)
                sub.send(mb.gen_pubrec(mid, proto_ver=5))
            else:
                awaiting.discard(mid)
                sub.send(mb.gen_pubcomp(mid, proto_ver=5))
        lost = [m for m in expected if m not in received]
        assert lost == [], f"acknowledged with PUBCOMP 0x00, never delivered: {lost}"
        assert sorted(received) == sorted(expected)
        sub.close()
    finally:
        broker.stop()


@pytest.mark.timeout(180)
def test_no_publish_again_after_pubrec_across_sigkill(tmp_path: Path) -> None:
    """The subscriber's PUBREC, the broker's PUBREL, kill: the resumed session finishes
    with PUBREL, never the PUBLISH again."""
    broker = start_edgebus(tmp_path, PERSISTENCE)
    sub = connect(broker, "q2r-sub", clean=True)
    sub.subscribe("q2r/#", 2)
    sub.disconnect()
    try:
        for trial in range(TRIALS):
            sub = connect(broker, "q2r-sub", clean=False)
            pub = connect(broker, f"q2r-pub{trial}", clean=True)
            pub.publish("q2r/x", f"M{trial}", qos=2)
            pub.disconnect()
            publish = sub.recv_publish(ack=False)
            assert publish.payload == f"M{trial}".encode()
            mid = publish.packet_id or 0
            sub.send(mb.gen_pubrec(mid, proto_ver=5))
            sub.wait_for(lambda p: p.type == mb.PacketType.PUBREL, what="PUBREL")
            kill(broker)
            sub.close()
            broker = start_edgebus(tmp_path, PERSISTENCE)
            sub = connect(broker, "q2r-sub", clean=False)
            resumed = sub.wait_for(
                lambda p: p.type in (mb.PacketType.PUBLISH, mb.PacketType.PUBREL),
                what="the resumed flow",
            )
            assert (resumed.type, resumed.packet_id) == (mb.PacketType.PUBREL, mid), (
                f"trial {trial}: after PUBREC the broker sent {resumed!r}"
            )
            sub.send(mb.gen_pubcomp(mid, proto_ver=5))
            sub.disconnect()
    finally:
        broker.stop()


@pytest.mark.timeout(180)
def test_a_packet_id_freed_by_a_refusing_pubrec_stays_free_across_sigkill(
    tmp_path: Path,
) -> None:
    """A refusing PUBREC (0x90, a topic deeper than max_topic_levels) ends the flow and
    frees the id; B reuses it at once, kill; B resent with DUP is routed."""
    config = PERSISTENCE + "\nmqtt:\n  max_topic_levels: 3\n"
    broker = start_edgebus(tmp_path, config)
    sub = connect(broker, "q2x-sub", clean=True)
    sub.subscribe("q2x/#", 2)
    sub.disconnect()
    for trial in range(TRIALS):
        pub = connect(broker, "q2x-pub", clean=trial == 0)
        pub.send(mb.gen_publish("q2x/too/deep/here", f"A{trial}", qos=2, mid=1, proto_ver=5))
        pubrec = pub.wait_for(lambda p: p.type == mb.PacketType.PUBREC, what="PUBREC")
        assert pubrec.reason_code == 0x90
        pub.send(mb.gen_publish("q2x/x", f"B{trial}", qos=2, mid=1, proto_ver=5))
        kill(broker)
        pub.close()
        broker = start_edgebus(tmp_path, config)
        pub = connect(broker, "q2x-pub", clean=False)
        pub.send(mb.gen_publish("q2x/x", f"B{trial}", qos=2, dup=True, mid=1, proto_ver=5))
        pubrec, pubcomp = pubrec_then_pubcomp(pub, 1)
        assert (pubrec.reason_code or 0, pubcomp.reason_code or 0) == (0, 0)
        pub.disconnect()
    try:
        sub = connect(broker, "q2x-sub", clean=False)
        received = [sub.recv_publish(unit(10)).payload.decode() for _ in range(TRIALS)]
        assert received == [f"B{t}" for t in range(TRIALS)]
        sub.close()
    finally:
        broker.stop()


@pytest.mark.timeout(180)
def test_a_packet_id_a_subscriber_holds_is_not_given_to_another_message(
    tmp_path: Path,
) -> None:
    """The subscriber gets a QoS 2 PUBLISH (id 2), answers PUBREC and holds the id until
    PUBREL; kill at once. The restarted broker must know it sent that id: the next
    message must not reuse it (the subscriber, an exactly-once receiver, would take it
    for the held one's resend: lost)."""
    broker = start_edgebus(tmp_path, PERSISTENCE)
    try:
        for trial in range(TRIALS):
            topic = f"q2o/{trial}"
            sub = connect(broker, f"q2o-sub{trial}", clean=True)
            sub.subscribe(f"{topic}/#", 2)
            pub = connect(broker, f"q2o-pub{trial}", clean=True)
            assert pub.publish(f"{topic}/x", "M0", qos=2, mid=1) is not None
            assert sub.recv_publish().payload == b"M0"  # id 1, completed
            pub.send(mb.gen_publish(f"{topic}/x", "M1", qos=2, mid=2, proto_ver=5))
            held = sub.wait_for(lambda p: p.type == mb.PacketType.PUBLISH, what="PUBLISH")
            kill(broker)
            awaiting = {held.packet_id}  # PUBREC answered: held until PUBREL
            delivered = [held.payload.decode()]
            answered = pub.collect(unit(2))
            sub.close()
            pub.close()
            broker = start_edgebus(tmp_path, PERSISTENCE)
            pub = connect(broker, f"q2o-pub{trial}", clean=False)
            if any(p.type == mb.PacketType.PUBREC and p.packet_id == 2 for p in answered):
                pub.send(mb.gen_pubrel(2, proto_ver=5))
                pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, what="PUBCOMP")
            else:
                pub.send(mb.gen_publish(f"{topic}/x", "M1", qos=2, dup=True, mid=2, proto_ver=5))
                pubrec_then_pubcomp(pub, 2)
            assert pub.publish(f"{topic}/x", "M2", qos=2, mid=3) is not None
            pub.disconnect()
            sub = connect(broker, f"q2o-sub{trial}", clean=False)
            suppressed: list[str] = []
            while "M2" not in delivered:
                try:
                    packet = sub.wait_for(
                        lambda p: p.type in (mb.PacketType.PUBLISH, mb.PacketType.PUBREL),
                        unit(5),
                        "PUBLISH",
                    )
                except AssertionError:
                    raise AssertionError(
                        f"trial {trial}: M2 never delivered; held id {held.packet_id}, "
                        f"delivered {delivered}, taken for resends {suppressed}"
                    ) from None
                mid = packet.packet_id or 0
                if packet.type == mb.PacketType.PUBREL:
                    awaiting.discard(mid)
                    sub.send(mb.gen_pubcomp(mid, proto_ver=5))
                    continue
                if mid in awaiting:
                    suppressed.append(packet.payload.decode())
                else:
                    awaiting.add(mid)
                    delivered.append(packet.payload.decode())
                sub.send(mb.gen_pubrec(mid, proto_ver=5))
            sub.disconnect()
    finally:
        broker.stop()
