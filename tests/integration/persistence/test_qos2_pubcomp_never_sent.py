"""A QoS 2 packet id whose PUBCOMP never reached the publisher stays received across a
kill -9 (docs/broker.md, "Persistence").

paho-mqtt 2.2 resends the PUBLISH of a message it had sent PUBREL for when it reconnects
twice without finishing its resends in between (a connection refused while the broker
restarts, or closed with DISCONNECT 0x93 Receive Maximum exceeded because it resends every
unfinished message at once): its ``_messages_reconnect_reset_out`` turns the state "resend
PUBREL" into "publish". The probe (t7_kill_v5.py: 3000 messages, 6 kills, Receive Maximum
32) found 159-335 messages delivered twice to a persistent QoS 2 subscriber: the broker
removed the id's record when the PUBREL arrived, its PUBCOMP (which waits for that
removal's commit) found the connection closed by 0x93 and was never sent, the kill came,
and the restarted broker routed the resent PUBLISH again.

Now the record stays until the PUBCOMP goes out on a live connection: the client cannot
have used the id for a new message before it has that PUBCOMP, so a PUBLISH with it is
still the same message, answered PUBREC and not routed, after a restart too.
"""

from __future__ import annotations

import collections
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import start_edgebus
from tests.helpers.qos2_flows import connect_persistent, drain_exactly_once
from tests.helpers.timeouts import unit

RECEIVE_MAXIMUM = 5
CONFIG = (
    "persistence: sqlite\n"
    f"mqtt:\n  receive_maximum: {RECEIVE_MAXIMUM}\n"
    "stream:\n  enabled: true\n  topics: ['x3p/#']\n"
)


def _publish(mid: int, dup: bool = False) -> bytes:
    return mb.gen_publish("x3p/x", f"M{mid}", qos=2, mid=mid, dup=dup, proto_ver=5)


def _count(db: sqlite3.Connection, query: str) -> int:
    return int(db.execute(query).fetchone()[0])


def _wait_until(db: sqlite3.Connection, query: str, expected: int, what: str) -> None:
    deadline = time.monotonic() + unit(10)
    while _count(db, query) != expected:
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pubrel_first", [False, True], ids=["publish_first", "pubrel_first"])
def test_a_publish_resent_after_its_pubrel_is_not_routed_again_after_a_kill(
    tmp_path: Path, pubrel_first: bool
) -> None:
    """``publish_first``: a write waits when the PUBRELs arrive, so do their PUBCOMPs'
    turns, which find the connection closed (nothing written). ``pubrel_first``: nothing
    waits, the first PUBCOMP's turn comes at once and writes the record's removal, and the
    connection closes while that waits for its commit: the record is written back when
    the connection closes (in the same commit here), not once the removal is committed
    (a kill between the two commits left the id unknown)."""
    gateway = start_edgebus(tmp_path, CONFIG)
    try:
        sub = connect_persistent(gateway, "x3p-sub", clean=True)
        sub.subscribe("x3p/#", 2)
        sub.disconnect()
        pub = connect_persistent(gateway, "x3p-pub", clean=True)
        for mid in range(1, 5):  # M1..M4: routed, PUBREC read
            pub.send(_publish(mid))
            pub.wait_for(lambda p: p.type == mb.PacketType.PUBREC, unit(10), f"PUBREC {mid}")
        db = sqlite3.connect(tmp_path / "data" / "edgebus.db", timeout=unit(10))
        db.isolation_level = None
        incoming = "SELECT count(*) FROM incoming WHERE client_id = 'x3p-pub'"
        _wait_until(db, incoming, 4, "M1..M4's packet ids were never committed")
        db.execute("BEGIN IMMEDIATE")  # nothing the gateway writes is committed meanwhile
        try:
            # M5 (a store write waiting), the PUBRELs of M1..M4 (their PUBCOMPs wait for
            # the commit), then M6..M10: M10 is one more than Receive Maximum unanswered.
            # The PINGREQ before M10, in the same write: its PINGRESP, not held for the
            # commit, goes out once the connection is closed.
            pubrels = b"".join(mb.gen_pubrel(mid, proto_ver=5) for mid in range(1, 5))
            last = mb.gen_pingreq() + _publish(10)
            if pubrel_first:
                pub.send(pubrels)
                pub.send(b"".join(_publish(mid) for mid in range(5, 10)) + last)
            else:
                pub.send(
                    _publish(5) + pubrels + b"".join(_publish(mid) for mid in range(6, 10)) + last
                )
            pub.wait_for(lambda p: p.type == mb.PacketType.PINGRESP, unit(10), "PINGRESP")
        finally:
            # The acknowledgements held for the commit, then DISCONNECT 0x93, go out once
            # it is committed: the PUBCOMPs found the connection closed.
            db.execute("ROLLBACK")
        answered = []
        while True:
            packet = pub.recv_packet(unit(10))
            answered.append(packet)
            if packet.type == mb.PacketType.DISCONNECT:
                break
        assert answered[-1].reason_code == 0x93, answered
        assert not [p for p in answered if p.type == mb.PacketType.PUBCOMP], answered
        pub.close()
        # M5..M9 committed with their packet ids (and whatever came before them).
        _wait_until(db, incoming + " AND packet_id BETWEEN 5 AND 9", 5, "M5..M9 not committed")
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(unit(10))
        gateway.stop()
        try:
            gateway = start_edgebus(tmp_path, CONFIG)
        finally:
            db.close()  # after: the last connection to close would delete the log
        # As paho 2.2 does after two reconnections: M1..M4 resent as PUBLISH (DUP) though
        # their PUBREL was sent, with M5..M9: more than Receive Maximum at once.
        pub = connect_persistent(gateway, "x3p-pub", clean=False)
        pub.send(b"".join(_publish(mid, dup=True) for mid in range(1, 10)))
        for _ in range(9):
            pub.wait_for(lambda p: p.type == mb.PacketType.PUBREC, unit(10), "PUBREC")
        pub.send(b"".join(mb.gen_pubrel(mid, proto_ver=5) for mid in range(1, 10)))
        for _ in range(9):
            pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, unit(10), "PUBCOMP")
        pub.send(_publish(10, dup=True))
        pub.wait_for(lambda p: p.type == mb.PacketType.PUBREC, unit(10), "PUBREC 10")
        pub.send(mb.gen_pubrel(10, proto_ver=5))
        pub.wait_for(lambda p: p.type == mb.PacketType.PUBCOMP, unit(10), "PUBCOMP 10")
        pub.disconnect()
        sub = connect_persistent(gateway, "x3p-sub", clean=False)
        delivered = drain_exactly_once(sub, "M10")
        sub.disconnect()
    finally:
        gateway.stop()
    counts = collections.Counter(delivered)
    assert sorted(m for m, n in counts.items() if n > 1) == [], delivered
    assert sorted(counts) == sorted(f"M{mid}" for mid in range(1, 11)), delivered
