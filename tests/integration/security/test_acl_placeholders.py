"""ACL placeholders on the wire: ``%c`` and ``%u`` are substituted verbatim, as mosquitto
substitutes them in its ``pattern`` lines, so a client id or a username with ``/`` fills
several levels (client ``c1/x`` may publish to ``dev/c1/x/t`` under ``dev/%c/#``); one
with ``+`` or ``#`` is denied from the first rule that would substitute it onwards, as
mosquitto denies such a client every pattern (its "dangerous client id"). Before, a
value with ``/`` made the rule not match (``c1/x`` was refused ``dev/c1/x/t``), and one
with ``+`` or ``#`` skipped the rule, so a later rule could still grant it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import pytest

from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.security.support import connect_raw, security_gateway

NOT_AUTHORIZED = 0x87
ACCEPTED = (0x00, 0x10)

RULES = [
    {"permission": "allow", "clientid": "observer", "action": "subscribe", "topics": ["#"]},
    {"permission": "deny", "action": "publish", "topics": ["dev/%c/secret/#"]},
    {"permission": "allow", "action": "publish", "topics": ["dev/%c/#", "users/%u/#"]},
    {"permission": "allow", "action": "subscribe", "topics": ["cmd/%c/#"]},
    {"permission": "allow", "topics": ["pub/#"]},  # after the rules with placeholders
]

# (client id, username, topic, allowed) for a PUBLISH
PUBLISH_CASES = [
    ("c1/x", None, "dev/c1/x/t", True),  # was refused: "/" in the client id
    ("c1/x", None, "dev/c1/x", True),
    ("c1/x", None, "dev/c1/t", False),  # not under dev/c1/x/
    ("c1/x", None, "dev/c1/x/secret/k", False),  # the deny rule, substituted likewise
    ("c1/x", None, "pub/x", True),
    ("/lead", None, "dev//lead/t", True),
    ("plain", "a/b", "users/a/b/x", True),  # %u likewise
    ("plain", "a/b", "users/a/x", False),
    ("plain", None, "dev/plain/t", True),
    ("plain", None, "pub/x", True),
    ("c+", None, "pub/x", False),  # was allowed: the rules with %c were skipped
    ("c#", None, "pub/x", False),
    ("plain", "u+", "pub/x", False),  # %u: a username with + or #
    ("plain", "u#", "dev/plain/t", True),  # decided before a topic substitutes %u
    ("plain", "u#", "pub/x", False),
    # One pass, as mosquitto's: a value holding the other placeholder is not filled in
    # again (a username "%c" took any user's users/<x>/# by choosing client id <x>).
    ("bob", "%c", "users/bob/t", False),
    ("bob", "%c", "users/%c/t", True),
    ("%u", "alice", "dev/alice/t", False),
    ("%u", "alice", "dev/%u/t", True),
]

# (client id, filter, allowed) for a SUBSCRIBE
SUBSCRIBE_CASES = [
    ("c1/x", "cmd/c1/x/#", True),  # was 0x87
    ("c1/x", "cmd/c1/#", False),
    ("c1/x", "cmd/c1/x/+", True),
    ("c+", "pub/#", False),
    ("plain", "cmd/plain/#", True),
]

_ids = itertools.count(1)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    config = {"acl": {"default": "deny", "deny_action": "ignore", "rules": RULES}}
    with security_gateway(tmp_path_factory.mktemp("acl-placeholders"), config) as gateway:
        yield gateway


def client(gw: RunningGateway, proto: int, client_id: str, username: str | None) -> RawClient:
    if username is None:
        raw, _ = connect_raw(gw, proto, client_id)
    else:
        raw, _ = connect_raw(gw, proto, client_id, username=username, password="x")
    return raw


@pytest.mark.parametrize(("client_id", "username", "topic", "allowed"), PUBLISH_CASES)
def test_publish_with_placeholders(
    gw: RunningGateway, client_id: str, username: str | None, topic: str, allowed: bool
) -> None:
    with contextlib.closing(client(gw, 5, client_id, username)) as publisher:
        ack = publisher.publish(topic, b"x", qos=1)
        assert ack is not None
        assert (topic, ack.reason_code in ACCEPTED) == (topic, allowed)
        if not allowed:
            assert ack.reason_code == NOT_AUTHORIZED


@pytest.mark.parametrize(("client_id", "topic_filter", "allowed"), SUBSCRIBE_CASES)
def test_subscribe_with_placeholders(
    gw: RunningGateway, client_id: str, topic_filter: str, allowed: bool
) -> None:
    with contextlib.closing(client(gw, 5, client_id, None)) as subscriber:
        codes = subscriber.subscribe(topic_filter, 1).reason_codes
        assert (topic_filter, codes) == (topic_filter, [1 if allowed else NOT_AUTHORIZED])


def test_an_mqtt311_client_id_with_a_slash_publishes_under_its_pattern(
    gw: RunningGateway,
) -> None:
    # The probe's case (3.1.1): mosquitto delivers it, edgebus dropped it.
    observer, _ = connect_raw(gw, 5, "observer")
    with contextlib.closing(observer):
        assert observer.subscribe("dev/#", 1).reason_codes == [1]
        with contextlib.closing(client(gw, 4, "c1/x", None)) as publisher:
            publisher.publish("dev/c1/x/t", b"from c1/x", qos=1)
            publisher.publish("dev/c1/t", b"denied", qos=1)  # 3.1.1: a PUBACK, dropped
            publisher.publish("dev/c1/x/end", b"end", qos=1)
        received = [observer.recv_publish() for _ in range(2)]
        assert [(p.topic, p.payload) for p in received] == [
            ("dev/c1/x/t", b"from c1/x"),
            ("dev/c1/x/end", b"end"),
        ]
