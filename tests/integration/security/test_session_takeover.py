"""Issue 8.1: taking over another user's persistent session gives nothing the ACL denies.

mallory may not read ``secret/#``. She connects with clean start 0 and the client id of
admin's persistent session (MQTT 5 and 3.1.1), over a real socket: the session resumes,
but neither its queued ``secret/*`` messages nor live ones reach her, nor do shared
subscriptions; what she may read still arrives. Her own subscriptions and retained
messages on subscribe follow the same rule.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.security.support import connect_raw, password_file, security_gateway

USERS = {"admin": "admin-pw", "mallory": "mallory-pw", "feeder": "feeder-pw"}
RULES = [{"permission": "deny", "username": "mallory", "topics": ["secret/#"]}]
SESSION = {"session_expiry_interval": 3600}

_ids = itertools.count(1)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    tmp = tmp_path_factory.mktemp("takeover")
    config = {
        "auth": {"password_file": str(password_file(tmp / "passwd", USERS))},
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0", "allow_anonymous": False}],
        "acl": {"rules": RULES},
    }
    with security_gateway(tmp, config) as gateway:
        yield gateway


def login(
    gw: RunningGateway, proto: int, client_id: str, user: str, clean: bool = True
) -> tuple[RawClient, mb.Packet]:
    extra = {"properties": SESSION} if proto == 5 else {}
    return connect_raw(
        gw, proto, client_id, username=user, password=USERS[user], clean_session=clean, **extra
    )


@contextlib.contextmanager
def feeder(gw: RunningGateway) -> Iterator[RawClient]:
    client, _ = login(gw, 5, f"feeder{next(_ids)}", "feeder")
    try:
        yield client
    finally:
        client.disconnect()


def publishes(client: RawClient, marker: str) -> list[tuple[str, bytes]]:
    """(topic, payload) of every PUBLISH up to and including the one on ``marker``."""
    got: list[tuple[str, bytes]] = []
    while not got or got[-1][0] != marker:
        packet = client.recv_publish()
        got.append((str(packet.topic), bytes(packet.payload)))
    return got


@pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])
@pytest.mark.parametrize("shared", [False, True], ids=["plain", "shared"])
def test_a_denied_user_resuming_admins_session_gets_no_secret(
    gw: RunningGateway, proto: int, shared: bool
) -> None:
    session_id = f"admin-console-{proto}-{int(shared)}"
    prefix = "$share/ops/" if shared else ""
    admin, _ = login(gw, proto, session_id, "admin", clean=proto == 5)  # 3.1.1: persistent
    suback = admin.subscribe([(f"{prefix}secret/#", 1), (f"{prefix}public/#", 1)])
    assert suback.reason_codes == [1, 1]
    admin.disconnect()

    with feeder(gw) as source:
        for topic in ("secret/queued", "public/queued"):
            source.publish(topic, topic.encode(), qos=1)

        mallory, connack = login(gw, proto, session_id, "mallory", clean=False)
        assert connack.session_present  # the session resumed, without what she may not read
        source.publish("secret/live", b"secret/live", qos=1)
        source.publish("public/live", b"public/live", qos=1)
        assert publishes(mallory, "public/live") == [
            ("public/queued", b"public/queued"),
            ("public/live", b"public/live"),
        ]
        source.publish("secret/later", b"x", qos=1)
        mallory.expect_no_packet()

        # Her own attempt is refused too, retained messages included.
        source.publish("secret/kept", b"kept", qos=1, retain=True)
        refused = 0x87 if proto == 5 else 0x80
        assert (
            mallory.subscribe([("secret/#", 1), ("#", 1), ("+/kept", 1)]).reason_codes
            == [refused] * 3
        )
        mallory.expect_no_packet()
        source.publish("secret/kept", b"", qos=1, retain=True)
        mallory.disconnect()

    assert gw.call(lambda: gw.broker.counters.dropped_not_authorized) >= 1


def test_the_owner_resuming_keeps_everything(gw: RunningGateway) -> None:
    """The check removes only what the new owner may not read."""
    admin, _ = login(gw, 5, "admin-own", "admin", clean=True)
    assert admin.subscribe([("secret/#", 1)]).reason_codes == [1]
    admin.disconnect()
    with feeder(gw) as source:
        source.publish("secret/mine", b"mine", qos=1)
        again, connack = login(gw, 5, "admin-own", "admin", clean=False)
        assert connack.session_present
        assert publishes(again, "secret/mine") == [("secret/mine", b"mine")]
        source.publish("secret/live", b"live", qos=1)
        assert publishes(again, "secret/live") == [("secret/live", b"live")]
        again.disconnect()


def test_a_denied_user_gets_no_messages_in_flight(gw: RunningGateway) -> None:
    """QoS 1 messages sent to admin but not acknowledged are resent on resume: not to her."""
    admin, _ = login(gw, 5, "admin-inflight", "admin", clean=True)
    assert admin.subscribe([("secret/#", 1)]).reason_codes == [1]
    with feeder(gw) as source:
        source.publish("secret/unacked", b"x", qos=1)
        assert admin.recv_publish(ack=False).topic == "secret/unacked"
        admin.abort()
        mallory, connack = login(gw, 5, "admin-inflight", "mallory", clean=False)
        assert connack.session_present
        mallory.expect_no_packet()
        mallory.disconnect()


def test_refused_subscriptions_are_logged_at_a_bounded_rate(
    gw: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="broker_core.broker")
    mallory, _ = login(gw, 5, "mallory-logged", "mallory")
    for _ in range(60):
        assert mallory.subscribe([("secret/#", 0)]).reason_codes == [0x87]
    mallory.disconnect()
    lines = [r.getMessage() for r in caplog.records if "may not subscribe" in r.getMessage()]
    assert 1 <= len(lines) <= 25
    assert "mallory-logged (user mallory" in lines[0]
    assert "'secret/#'" in lines[0]
