"""A persistent session's SUBACK and UNSUBACK go out once the subscription change is
committed (docs/broker.md, "Persistence"): a kill -9 right after one never takes back
what the client was told.

Before, the SUBACK went out as the record was handed to the store's writer: with the
commit held back (here: the test holds the store's write lock) and the gateway killed,
the client had its SUBACK, went offline with its persistent session, and the restarted
broker had no subscription for it; every message published while it was away was lost.
Likewise an UNSUBACK: the subscription came back after the kill.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

SESSION = {"session_expiry_interval": 3600}


def _start(tmp_path: Path) -> BrokerHandle:
    return start_edgebus(tmp_path, "persistence: sqlite\n")


def _connect(
    broker: BrokerHandle, client_id: str, clean: bool, persistent: bool = True
) -> RawClient:
    client = RawClient(broker.host, broker.port, protocol_level=5)
    client.do_connect(
        client_id, proto_ver=5, clean_session=clean, properties=SESSION if persistent else None
    )
    return client


def _open_store(tmp_path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(tmp_path / "data" / "edgebus.db", timeout=unit(10))
    db.isolation_level = None
    return db


def _wait_rows(db: sqlite3.Connection, table: str, client_id: str, rows: int) -> None:
    """Until the gateway committed ``rows`` rows of ``table`` for ``client_id``."""
    query = f"SELECT count(*) FROM {table} WHERE client_id = ?"
    deadline = time.monotonic() + unit(10)
    while int(db.execute(query, (client_id,)).fetchone()[0]) != rows:
        assert time.monotonic() < deadline, f"{table} of {client_id} never had {rows} rows"
        time.sleep(0.05)


@contextmanager
def _write_lock(db: sqlite3.Connection) -> Iterator[None]:
    """Nothing the gateway writes is committed meanwhile (its writer waits up to 5 s)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")


def _kill(gateway: BrokerHandle) -> None:
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(unit(10))
    gateway.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("change", ["subscribe", "unsubscribe"])
def test_an_acknowledged_subscription_change_survives_sigkill(tmp_path: Path, change: str) -> None:
    """SUBSCRIBE (or UNSUBSCRIBE) while the commit cannot happen, then kill -9: the client
    either got no answer, or the restarted broker has what it answered."""
    gateway = _start(tmp_path)
    db = _open_store(tmp_path)
    try:
        sub = _connect(gateway, "sk-sub", clean=True)
        if change == "unsubscribe":
            sub.subscribe("sk/#", 1)
        _wait_rows(db, "sessions", "sk-sub", 1)
        _wait_rows(db, "subscriptions", "sk-sub", 1 if change == "unsubscribe" else 0)
        with _write_lock(db):
            if change == "subscribe":
                sub.send(mb.gen_subscribe(7, "sk/#", 1, proto_ver=5))
                acknowledged = mb.PacketType.SUBACK
            else:
                sub.send(mb.gen_unsubscribe(7, "sk/#", proto_ver=5))
                acknowledged = mb.PacketType.UNSUBACK
            # The correct answer is none: a bounded wait for something not to happen.
            answered = sub.collect(unit(1))
            _kill(gateway)
        sub.close()
        try:
            gateway = _start(tmp_path)
        finally:
            db.close()  # after: the last connection to close would delete the log
        pub = _connect(gateway, "sk-pub", clean=True, persistent=False)
        assert pub.publish("sk/x", "M", qos=1) is not None
        pub.disconnect()
        sub = _connect(gateway, "sk-sub", clean=False)
        assert sub.connack is not None and sub.connack.session_present
        got = [p.payload for p in sub.collect(unit(1)) if p.type == mb.PacketType.PUBLISH]
        sub.disconnect()
    finally:
        gateway.stop()
    told = [p for p in answered if p.type == acknowledged and p.packet_id == 7]
    if told:
        # What the client was told must hold after the kill.
        expected = [b"M"] if change == "subscribe" else []
        assert got == expected, f"{told[0].name} sent, then lost by the kill: got {got}"
    assert told == [], f"{acknowledged.name} before its commit: {answered}"


@pytest.mark.timeout(120)
def test_held_subacks_keep_order_with_pubacks_and_retained_follow(tmp_path: Path) -> None:
    """With the commit held back, a persistent session's SUBACKs wait and keep their
    place among its PUBACKs; the retained message follows its SUBACK once that goes. A
    clean session's SUBACK does not wait."""
    gateway = _start(tmp_path)
    db = _open_store(tmp_path)
    try:
        pub = _connect(gateway, "so-pub", clean=True, persistent=False)
        assert pub.publish("so/r", "R", qos=1, retain=True) is not None
        client = _connect(gateway, "so-sub", clean=True)
        clean = _connect(gateway, "so-clean", clean=True, persistent=False)
        _wait_rows(db, "sessions", "so-sub", 1)
        with _write_lock(db):
            assert clean.subscribe("so/r", 1).reason_codes == [1]  # at once
            clean.wait_for(lambda p: p.type == mb.PacketType.PUBLISH and p.retain, unit(10))
            client.send(
                mb.gen_subscribe(4, "so/a/#", 1, proto_ver=5)
                + mb.gen_publish("so/p", "5", qos=1, mid=5, proto_ver=5)
                + mb.gen_subscribe(6, "so/r", 1, proto_ver=5)
                + mb.gen_publish("so/p", "7", qos=1, mid=7, proto_ver=5)
            )
            early = client.collect(unit(1))
        packets = list(early)
        while sum(p.type in (mb.PacketType.SUBACK, mb.PacketType.PUBACK) for p in packets) < 4:
            packets.append(client.recv_packet(unit(10)))
        if not any(p.type == mb.PacketType.PUBLISH for p in packets):
            packets.append(client.wait_for(lambda p: p.type == mb.PacketType.PUBLISH, unit(10)))
        client.disconnect()
        clean.disconnect()
        pub.disconnect()
    finally:
        db.close()
        gateway.stop()
    order = [
        (mb.PacketType(p.type).name, p.packet_id if p.type != mb.PacketType.PUBLISH else p.topic)
        for p in packets
    ]
    acks = [entry for entry in order if entry[0] != "PUBLISH"]
    assert acks == [("SUBACK", 4), ("PUBACK", 5), ("SUBACK", 6), ("PUBACK", 7)], order
    assert order.index(("PUBLISH", "so/r")) > order.index(("SUBACK", 6)), order
    assert [p.name for p in early] == [], "answered while nothing could be committed"


@pytest.mark.timeout(60)
def test_a_persistent_subscribe_gets_its_suback_then_retained_messages(tmp_path: Path) -> None:
    """Without anything held back: SUBACK, then each retained message, RETAIN set."""
    gateway = _start(tmp_path)
    try:
        pub = _connect(gateway, "sr-pub", clean=True, persistent=False)
        for topic in ("sr/a", "sr/b"):
            assert pub.publish(topic, topic.upper(), qos=1, retain=True) is not None
        pub.disconnect()
        sub = _connect(gateway, "sr-sub", clean=True)
        sub.send(mb.gen_subscribe(3, "sr/#", 1, proto_ver=5))
        first = sub.recv_packet(unit(10))
        assert (first.type, first.packet_id, first.reason_codes) == (mb.PacketType.SUBACK, 3, [1])
        retained = [sub.recv_publish(unit(10)) for _ in range(2)]
        assert sorted((p.topic, p.payload, p.retain) for p in retained) == [
            ("sr/a", b"SR/A", True),
            ("sr/b", b"SR/B", True),
        ]
        sub.disconnect()
        # The subscription is the restarted broker's too (a clean stop here).
        gateway.stop()
        gateway = _start(tmp_path)
        sub = _connect(gateway, "sr-sub", clean=False)
        assert sub.connack is not None and sub.connack.session_present
        pub = _connect(gateway, "sr-pub", clean=True, persistent=False)
        assert pub.publish("sr/c", "C", qos=1) is not None
        assert sub.recv_publish(unit(10)).payload == b"C"
        sub.disconnect()
        pub.disconnect()
    finally:
        gateway.stop()


@pytest.mark.timeout(60)
def test_a_failed_subscription_write_disconnects_instead_of_suback(tmp_path: Path) -> None:
    """The store cannot commit (the lock held past the writer's 5 s busy timeout): as for
    a PUBACK, no SUBACK; DISCONNECT 0x80 "store write failed"."""
    gateway = _start(tmp_path)
    db = _open_store(tmp_path)
    try:
        sub = _connect(gateway, "sf-sub", clean=True)
        _wait_rows(db, "sessions", "sf-sub", 1)
        with _write_lock(db):
            sub.send(mb.gen_subscribe(2, "sf/#", 1, proto_ver=5))
            disconnect = sub.expect_closed(unit(20), reason_code=0x80, require_reason=True)
        assert disconnect is not None
        assert disconnect.properties.get("reason_string") == "store write failed"
    finally:
        db.close()
        gateway.stop()
