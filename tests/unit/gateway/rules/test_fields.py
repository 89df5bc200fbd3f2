"""Rows of every broker event, with EMQX's field names, and webhook bodies built from them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from broker_core.context import Context, Origin
from broker_core.observe import (
    EVENT_KINDS,
    ClientConnack,
    ClientConnect,
    ClientConnected,
    ClientDisconnected,
    ClientSubscribe,
    ClientUnsubscribe,
    MessageAcked,
    MessageDelivered,
    MessageDropped,
    MessagePublish,
    SessionSubscribed,
    SessionTerminated,
    SessionUnsubscribed,
)
from gateway.config.models.rules import WebhookConfig
from gateway.rules.fields import (
    EVENT_COLUMNS,
    EVENT_COMMON_COLUMNS,
    EVENT_MESSAGE_COLUMNS,
    event_row,
)
from gateway.webhook import Webhook

AT = 1_700_000_000.5
MESSAGE = Context("t/1", b"\xffbin", 1, True, origin=Origin("mqtt", "pub", "10.0.0.1:7", "u"))
CONNECT = dict(
    username="u", peer="10.0.0.2:9", protocol_level=5, keep_alive=30, clean_start=True,
    expiry_interval=0, listener="tcp",
)  # fmt: skip
SUBSCRIPTION = dict(
    client_id="c", username=None, peer="10.0.0.2:9", topic_filter="a/#", qos=1, no_local=False,
    retain_as_published=True, retain_handling=0, subscription_id=None, at=AT,
)  # fmt: skip

EVENTS = [
    ClientConnect(client_id="c", **CONNECT, at=AT),
    ClientConnack(client_id="c", **CONNECT, reason_code=0x87, at=AT),
    ClientConnected("c", "u", "10.0.0.2:9", 5, 30, True, 0, False, "tcp", AT),
    ClientDisconnected("c", "u", "10.0.0.2:9", 4, 0x8E, AT),
    ClientSubscribe(**SUBSCRIPTION),
    ClientUnsubscribe("c", None, "10.0.0.2:9", "a/#", AT),
    SessionSubscribed(**SUBSCRIPTION),
    SessionUnsubscribed("c", None, "10.0.0.2:9", "a/#", AT),
    SessionTerminated("c", "u", "expired", AT),
    MessagePublish(MESSAGE, AT),
    MessageDelivered("c", "u", "10.0.0.2:9", 0, False, MESSAGE, AT),
    MessageAcked("c", "u", "10.0.0.2:9", 1, 7, MESSAGE, AT),
    MessageDropped("queue_full", "c", "u", MESSAGE, AT),
]


def test_every_event_kind_has_a_row() -> None:
    assert [type(event) for event in EVENTS] == list(EVENT_KINDS)
    for event in EVENTS:
        row = event_row(event, "n1")
        # message.publish: the message's time, as a rule on its topic reads it
        at = MESSAGE.received_at // 1_000_000 if event.NAME == "message.publish" else AT * 1000
        assert (row["event"], row["timestamp"], row["node"]) == (event.NAME, at, "n1")
        json.dumps(row, default=repr)  # JSON but for bytes payloads (bodies encode them)


def test_the_event_column_lists_are_the_rows_columns() -> None:
    """What ``SELECT *`` and the name-case warnings take an event's columns to be
    (``EVENT_*_COLUMNS``) is what ``event_row`` gives: every row has the common ones, a
    ``message_*`` row but ``message_publish`` (a message's row) the message's with the
    receiving client's too, and no row a column outside ``EVENT_COLUMNS``."""
    seen: set[str] = set()
    for event in EVENTS:
        row = event_row(event)
        seen.update(row)
        assert set(EVENT_COMMON_COLUMNS) <= set(row), event.NAME
        if event.NAME.startswith("message.") and event.NAME != "message.publish":
            assert set(EVENT_MESSAGE_COLUMNS) <= set(row), event.NAME
    assert seen <= set(EVENT_COLUMNS), seen - set(EVENT_COLUMNS)


def test_rows_use_emqx_names() -> None:
    rows = {event.NAME: event_row(event) for event in EVENTS}
    assert rows["client.connack"]["reason_code"] == rows["client.connack"]["conn_ack"] == 0x87
    assert rows["client.connected"]["ipaddress"] == "10.0.0.2"
    assert (rows["client.connected"]["proto_ver"], rows["client.connected"]["keepalive"]) == (5, 30)
    assert rows["client.disconnected"]["reason"] == "session_taken_over"
    assert rows["session.subscribed"]["opts"] == {"qos": 1, "nl": 0, "rap": 1, "rh": 0}
    assert rows["session.terminated"]["reason"] == "expired"
    assert rows["message.publish"]["clientid"] == "pub"
    delivered = rows["message.delivered"]
    assert (delivered["from_clientid"], delivered["clientid"], delivered["qos"]) == ("pub", "c", 0)
    assert rows["message.acked"]["packet_id"] == 7
    assert rows["message.dropped"]["reason"] == "queue_full"


def test_bodies_encode_payloads_and_are_signed() -> None:
    plain = Webhook(WebhookConfig(name="w", url="http://127.0.0.1:1/x", secret="s"), "n")
    body = plain.body(EVENTS[9])  # message.publish, a payload that is not UTF-8
    decoded = json.loads(body)
    assert decoded["action"] == "message_publish"
    assert base64.b64decode(decoded["payload"]) == b"\xffbin"
    assert decoded["payload_encoding"] == "base64"
    signature = plain.headers(body)["X-Edgebus-Signature"]
    assert signature == "sha256=" + hmac.new(b"s", body, hashlib.sha256).hexdigest()
    text = Context("t/2", b"hello", origin=Origin("mqtt", "pub"))
    assert json.loads(plain.body(MessagePublish(text, AT)))["payload"] == "hello"
    b64 = Webhook(
        WebhookConfig(name="b", url="http://127.0.0.1:1/x", payload_encoding="base64"), "n"
    )
    assert json.loads(b64.body(MessagePublish(text, AT)))["payload"] == "aGVsbG8="
    assert "X-Edgebus-Signature" not in b64.headers(b"{}")
