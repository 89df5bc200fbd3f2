"""Session state and expiry: MQTT 3.1.1 3.1.2.4 / 4.1, MQTT 5.0 3.1.2.11.2, 3.14.2.2.2, 4.1."""

from __future__ import annotations

import time

from tests.conformance.support import BOTH, Clients, short_wait
from tests.helpers.timeouts import unit


def test_v5_session_expiry_absent_ends_the_session_with_the_connection(
    clients: Clients, root: str
) -> None:
    """5.0 3.1.2.11.2, MQTT-4.1.0-2: without Session Expiry Interval (0) the Session ends when
    the connection closes, even with Clean Start 0: no session is resumed later."""
    cid = clients.client_id("se0")
    first = clients.connect(5, cid, clean=False)
    first.subscribe(f"{root}/t", 1)
    first.disconnect()
    again = clients.connect(5, cid, clean=False, session_present=False)
    publisher = clients.connect(5)
    publisher.publish(f"{root}/t", b"x", qos=1)
    again.expect_no_packet(short_wait())


def test_v5_session_expires_after_the_interval(clients: Clients, root: str) -> None:
    """MQTT-3.1.2-23, MQTT-4.1.0-2 (5.0): the Server keeps the Session after the connection
    closes, and discards it once the Session Expiry Interval has passed."""
    cid = clients.client_id("se1")
    expiring = {"properties": {"session_expiry_interval": 1}}
    first = clients.connect(5, cid, clean=False, **expiring)
    first.subscribe(f"{root}/t", 1)
    first.disconnect()
    time.sleep(1.0 + unit(1.0))  # bounded wait for the session's absence
    clients.connect(5, cid, clean=False, session_present=False)


def test_v5_session_with_maximum_expiry_is_kept(clients: Clients, root: str) -> None:
    """5.0 3.1.2.11.2: Session Expiry Interval 0xFFFFFFFF means the Session does not expire;
    MQTT-3.1.2-23: it is stored while the connection is closed."""
    cid = clients.client_id("semax")
    never = {"properties": {"session_expiry_interval": 0xFFFFFFFF}}
    first = clients.connect(5, cid, clean=False, **never)
    first.subscribe(f"{root}/t", 1)
    first.disconnect()
    publisher = clients.connect(5)
    publisher.publish(f"{root}/t", b"kept", qos=1)
    again = clients.connect(5, cid, clean=False, session_present=True, **never)
    assert again.recv_publish().payload == b"kept"
    clients.connect(5, cid, clean=True)


def test_v5_disconnect_can_shorten_the_session_expiry(clients: Clients, root: str) -> None:
    """5.0 3.14.2.2.2: the Session Expiry Interval in the Client's DISCONNECT replaces the one
    of CONNECT; setting it to 0 ends the Session with the connection."""
    cid = clients.client_id("sed")
    first = clients.connect(5, cid, clean=False, properties={"session_expiry_interval": 300})
    first.subscribe(f"{root}/t", 1)
    first.disconnect(0, properties={"session_expiry_interval": 0})
    clients.connect(5, cid, clean=False, session_present=False)


def test_v5_clean_start_discards_an_existing_session(clients: Clients, root: str) -> None:
    """MQTT-3.1.2-4 (5.0): Clean Start 1 discards any existing Session; MQTT-3.2.2-2: Session
    Present is 0."""
    cid = clients.client_id("cs")
    persistent = {"properties": {"session_expiry_interval": 300}}
    first = clients.connect(5, cid, clean=False, **persistent)
    first.subscribe(f"{root}/t", 1)
    first.disconnect()
    second = clients.connect(5, cid, clean=True, session_present=False, **persistent)
    publisher = clients.connect(5)
    publisher.publish(f"{root}/t", b"x", qos=1)
    second.expect_no_packet(short_wait())
    second.disconnect()
    clients.connect(5, cid, clean=True)


@BOTH
def test_takeover_keeps_a_persistent_session(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.1.4-2 (3.1.1) / MQTT-3.1.4-3 (5.0) with MQTT-3.2.2-2 (3.1.1) / MQTT-3.2.2-3
    (5.0): a new connection taking over a session with Clean Session/Start 0 resumes it
    (Session Present 1, subscriptions intact)."""
    cid = clients.client_id("tko")
    persistent = {"properties": {"session_expiry_interval": 300}} if proto == 5 else {}
    first = clients.connect(proto, cid, clean=False, **persistent)
    first.subscribe(f"{root}/t", 1)
    second = clients.connect(proto, cid, clean=False, session_present=True, **persistent)
    first.expect_closed()
    publisher = clients.connect(proto)
    publisher.publish(f"{root}/t", b"x", qos=1)
    assert second.recv_publish().payload == b"x"
    second.disconnect()
    clients.connect(proto, cid, clean=True)


@BOTH
def test_session_state_is_kept_while_connected(clients: Clients, root: str, proto: int) -> None:
    """MQTT-4.1.0-1 (5.0; 4.1 of 3.1.1): the Server MUST NOT discard Session State while the
    connection is open: a subscription made long before still delivers."""
    subscriber = clients.subscriber(f"{root}/t", 1, proto)
    for _ in range(3):
        subscriber.ping()
    publisher = clients.connect(proto)
    publisher.publish(f"{root}/t", b"x", qos=1)
    assert subscriber.recv_publish().payload == b"x"
