"""QoS 2 exactly once across SIGKILL: a persistent subscriber gets every message the
publisher sent, once, however often the gateway is killed (docs/broker.md, "Persistence").

The publisher (a persistent session) keeps 40 QoS 2 messages in flight; each kill is
made on a wire event (a PUBREC read), so messages are between routing and commits; after
each restart it resumes its session and sends again what had no PUBREC (DUP, same id)
and the PUBRELs. The subscriber (persistent, QoS 2) is offline meanwhile: its queue is in
the store. At the end it drains the queue as an exactly-once receiver.

With the stream log (a durable participant: the message goes to the log, then its
packet id is recorded), the id was recorded in a store commit after the one holding the
message's queue entry: a kill between them left the message queued and its id unknown, so
the resend was routed again and queued twice (the probe found 3-27 duplicates a run).
Now the record and the queue entries are in one commit, made once the log committed.
Without a durable participant that was so already; it stays so.
"""

from __future__ import annotations

import collections
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.qos2_flows import NumberedPublisher, connect_persistent, drain_exactly_once
from tests.helpers.timeouts import unit

WINDOW = 40
KILLS = 6
TOPIC = "x2k/s"
STREAM = "stream:\n  enabled: true\n  fsync: always\n  segment_bytes: 64KB\n"


def _start(tmp_path: Path, stream: bool) -> BrokerHandle:
    config = (
        "persistence: sqlite\n"
        "mqtt:\n  receive_maximum: 64\n  max_queued_messages: 100000\n" + (STREAM if stream else "")
    )
    return start_edgebus(tmp_path, config)


def _rows(db: sqlite3.Connection, table: str) -> int:
    query = f"SELECT count(*) FROM {table} WHERE client_id LIKE 'x2r-%'"
    return int(db.execute(query).fetchone()[0])


@pytest.mark.timeout(240)
@pytest.mark.parametrize("stream", [True, False], ids=["stream_log", "store_only"])
def test_a_persistent_subscriber_gets_each_qos2_message_once_across_sigkill(
    tmp_path: Path, stream: bool
) -> None:
    rng = random.Random(20)
    gateway = _start(tmp_path, stream)
    publisher = NumberedPublisher("x2k-pub", TOPIC, WINDOW)
    try:
        sub = connect_persistent(gateway, "x2k-sub", clean=True)
        sub.subscribe("x2k/#", 2)
        sub.disconnect()
        publisher.connect(gateway, first=True)
        for _ in range(KILLS):
            publisher.run(rng.randint(50, 150))
            gateway.process.send_signal(signal.SIGKILL)
            gateway.process.wait(unit(10))
            gateway.stop()
            assert publisher.client is not None
            publisher.client.close()
            gateway = _start(tmp_path, stream)
            publisher.connect(gateway, first=False)
        publisher.finish()
        publisher.seq += 1
        last = str(publisher.seq)
        assert publisher.client is not None
        assert publisher.client.publish(TOPIC, last, qos=2, mid=1) is not None
        publisher.client.disconnect()
        sub = connect_persistent(gateway, "x2k-sub", clean=False)
        delivered = drain_exactly_once(sub, last)
        sub.disconnect()
    finally:
        gateway.stop()
    counts = collections.Counter(int(payload) for payload in delivered)
    twice = sorted(seq for seq, count in counts.items() if count > 1)
    missing = sorted(set(range(1, publisher.seq + 1)) - set(counts))
    assert twice == [], f"delivered more than once: {twice}"
    assert missing == [], f"never delivered: {missing}"
    assert publisher.seq >= KILLS * 50


@pytest.mark.timeout(120)
def test_a_later_qos1_or_qos0_message_does_not_overtake_a_qos2_one(tmp_path: Path) -> None:
    """A QoS 2 message whose packet id waits for the log's commit before it is recorded
    is routed at once, as the QoS 1 and 0 messages after it are: none overtakes it in
    the publisher's acknowledgements (PUBREC, then PUBACK), nor toward a subscriber that
    gets them all at QoS 1 or 0, nor in an offline session's queue, whose messages of each
    QoS come in order (MQTT 5.0 4.6 [MQTT-4.6.0-5]: the same topic and QoS). Across QoS
    levels they do not: a QoS 2 PUBLISH to a persistent session waits for the commit of
    its packet id (``Outgoing._send_qos2``), a QoS 1 one after it does not."""
    rounds = 30
    gateway = _start(tmp_path, stream=True)
    try:
        offline = connect_persistent(gateway, "x2o-offline", clean=True)
        offline.subscribe("x2o/#", 2)
        offline.disconnect()
        online = connect_persistent(gateway, "x2o-online", clean=True)
        online.subscribe("x2o/#", 1)
        pub = connect_persistent(gateway, "x2o-pub", clean=True)
        received: list[str] = []
        for r in range(rounds):
            pub.send(
                mb.gen_publish("x2o/t", f"{r}a", qos=2, mid=1, proto_ver=5)
                + mb.gen_publish("x2o/t", f"{r}b", qos=1, mid=2, proto_ver=5)
                + mb.gen_publish("x2o/t", f"{r}c", qos=0, proto_ver=5)
            )
            acks = [pub.recv_packet(unit(10)), pub.recv_packet(unit(10))]
            assert [(p.type, p.packet_id) for p in acks] == [
                (mb.PacketType.PUBREC, 1),
                (mb.PacketType.PUBACK, 2),
            ]
            pub.send(mb.gen_pubrel(1, proto_ver=5))
            pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, unit(10), "PUBCOMP")
            for _ in range(3):
                publish = online.recv_publish(unit(10))
                received.append(publish.payload.decode())
        assert received == [f"{r}{x}" for r in range(rounds) for x in "abc"]
        pub.disconnect()
        online.disconnect()
        offline = connect_persistent(gateway, "x2o-offline", clean=False)
        queued = drain_exactly_once(offline, f"{rounds - 1}a")
        while f"{rounds - 1}b" not in queued:
            queued += drain_exactly_once(offline, f"{rounds - 1}b")
        offline.disconnect()
    finally:
        gateway.stop()
    for qos, x in ((2, "a"), (1, "b")):
        assert [m for m in queued if m.endswith(x)] == [f"{r}{x}" for r in range(rounds)], qos


@pytest.mark.timeout(120)
def test_a_qos2_resend_is_answered_once_its_packet_id_is_committed(tmp_path: Path) -> None:
    """The publisher's connection drops before its PUBREC and it resends (DUP) at once,
    while the packet id's record is not committed yet (here: the test holds the store's
    write lock); then a kill. Before, the resend got PUBREC at once (the id was known in
    memory): the publisher went on with PUBREL, the restarted broker, which never
    committed the id nor the message's queue entry, answered PUBCOMP, and the message was
    lost. Now that PUBREC waits for the commit, as the first one does."""
    gateway = _start(tmp_path, stream=False)
    try:
        sub = connect_persistent(gateway, "x2r-sub", clean=True)
        sub.subscribe("x2r/#", 2)
        sub.disconnect()
        pub = connect_persistent(gateway, "x2r-pub", clean=True)
        db = sqlite3.connect(tmp_path / "data" / "edgebus.db", timeout=unit(10))
        db.isolation_level = None
        # The subscription and both sessions committed (the SUBACK waited for the
        # subscription's commit; the publisher's session row may still be pending).
        deadline = time.monotonic() + unit(10)
        while _rows(db, "subscriptions") < 1 or _rows(db, "sessions") < 2:
            assert time.monotonic() < deadline, "the subscription was never committed"
            time.sleep(0.05)
        db.execute("BEGIN IMMEDIATE")  # nothing the gateway writes is committed meanwhile
        try:
            pub.send(mb.gen_publish("x2r/x", "M", qos=2, mid=1, proto_ver=5))
            pub.close()
            pub = connect_persistent(gateway, "x2r-pub", clean=False)
            pub.send(mb.gen_publish("x2r/x", "M", qos=2, dup=True, mid=1, proto_ver=5))
            answered = pub.collect(unit(1))
            gateway.process.send_signal(signal.SIGKILL)
            gateway.process.wait(unit(10))
            gateway.stop()
        finally:
            db.execute("ROLLBACK")
        pub.close()
        try:
            gateway = _start(tmp_path, stream=False)
        finally:
            db.close()  # after: the last connection to close would delete the log
        pub = connect_persistent(gateway, "x2r-pub", clean=False)
        if any(p.type == mb.PacketType.PUBREC for p in answered):
            pub.send(mb.gen_pubrel(1, proto_ver=5))
        else:
            pub.send(mb.gen_publish("x2r/x", "M", qos=2, dup=True, mid=1, proto_ver=5))
            pub.wait_for(lambda p: p.type == mb.PacketType.PUBREC, unit(10), "PUBREC")
            pub.send(mb.gen_pubrel(1, proto_ver=5))
        pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, unit(10), "PUBCOMP")
        pub.disconnect()
        sub = connect_persistent(gateway, "x2r-sub", clean=False)
        try:
            delivered = drain_exactly_once(sub, "M")
        except AssertionError as exc:
            raise AssertionError(f"acknowledged (answered {answered}), never delivered") from exc
        sub.disconnect()
    finally:
        gateway.stop()
    assert delivered == ["M"]
