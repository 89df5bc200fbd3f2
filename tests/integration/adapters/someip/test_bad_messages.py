"""MQTT messages that used to take the SOME/IP adapter down, with real someipy apps on
another daemon: a JSON string ``"\\ud800"`` (a lone surrogate: valid JSON, no Unicode
text) for a ``string`` field. Encoding it raised ``UnicodeEncodeError`` out of the feed
of an offered event and out of the requests to a consumed method, and the adapter
restarted (its counters and calls in flight lost). Now it does not fit the layout: the
feed counts it in ``feeds_malformed``, a request is answered ``E_MALFORMED_MESSAGE``
naming the field, and the adapter goes on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.someip import SomeipPeer, daemons
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import (
    adapter_status,
    first_event,
    first_message,
    gateway,
    mqtt,
    wait_state,
)
from tests.integration.broker.support import PahoClient, publish_props, wait_until

NAMED = "{type: struct, fields: [{name: name, type: string}]}"
SURROGATE = json.dumps({"name": "\ud800"}).encode()  # ASCII: {"name": "\ud800"}


def assert_still_running(status: dict[str, object]) -> None:
    assert (status["state"], status["restarts"], status["last_error"]) == ("running", 0, None)


def test_a_feed_that_is_no_unicode_text_is_counted_and_the_next_one_sent(
    tmp_path: Path,
) -> None:
    offer = f"""
offer:
  - {{service_id: 0x2000, instance_id: 3, ttl: 3s, cyclic_offer_delay: 500ms, eventgroups: [1],
     events: [{{id: 0x8001, layout: {NAMED}}}, {{id: 0x8002, from_mqtt: raw/marker}}]}}
"""
    with daemons("127.0.0.2") as (remote,), gateway(tmp_path, remote.net, offer) as gw:
        wait_state(gw, "running")
        with (
            SomeipPeer.start(
                remote, role="client", service=0x2000, instance=3, eventgroups={1: [0x8001, 0x8002]}
            ) as ecu,
            mqtt(gw, "feeder") as feeder,
        ):
            ecu.wait("available")
            first_event(ecu, lambda: feeder.publish("raw/marker", b"\x07", qos=1), 0x8002)
            feeder.publish("someip/2000/0003/event/8001", SURROGATE, qos=1)
            feeder.publish("someip/2000/0003/event/8001", b'{"name": "ok"}', qos=1)
            got = ecu.wait("event", lambda e: e["event"] == 0x8001, timeout=unit(10))
            # BOM, "ok", NUL, after a 32-bit length field
            assert bytes.fromhex(got["payload"]) == b"\x00\x00\x00\x06\xef\xbb\xbfok\x00"
            status = adapter_status(gw)
    assert status["component_stats"]["feeds_malformed"] == 1
    assert_still_running(status)


def reply(client: PahoClient, correlation: bytes) -> tuple[int, bytes]:
    """(someip.return_code, payload) of the response carrying ``correlation``."""
    while True:
        message = client.expect_message(unit(10))
        if message.properties.CorrelationData == correlation:
            return int(dict(message.properties.UserProperty)["someip.return_code"]), message.payload


def test_a_request_that_is_no_unicode_text_is_answered_malformed(tmp_path: Path) -> None:
    consume = f"""
consume:
  - service_id: 0x1234
    instance_id: 1
    timeout: 5s
    methods:
      - {{id: 4, request_layout: {NAMED}}}
"""
    with (
        daemons("127.0.0.2") as (remote,),
        SomeipPeer.start(remote, role="server", service=0x1234, instance=1, methods={4: "hex:2a"}),
        gateway(tmp_path, remote.net, consume) as gw,
    ):
        wait_state(gw, "running")
        with mqtt(gw, "dash", "replies/dash") as dash:

            def request(payload: bytes, correlation: bytes) -> None:
                props = publish_props(ResponseTopic="replies/dash", CorrelationData=correlation)
                dash.publish("someip/1234/0001/method/0004", payload, qos=1, properties=props)

            request(SURROGATE, b"bad")
            code, payload = reply(dash, b"bad")
            assert code == 9  # E_MALFORMED_MESSAGE
            detail = json.loads(payload)["detail"]
            assert detail.startswith("request $.name: the string is not Unicode text")
            request(b'{"name": "ok"}', b"good")
            assert reply(dash, b"good") == (0, b"\x2a")
        status = wait_until(
            lambda: (s := adapter_status(gw))["component_stats"]["calls"] == 1 and s,
            unit(10),
            "the call counted",
        )
    assert status["component_stats"]["requests_malformed"] == 1
    assert_still_running(status)


def test_an_event_string_with_a_nul_before_its_end_is_malformed(tmp_path: Path) -> None:
    """A dynamic-length string ends with its NUL: a NUL inside its length before the
    end is a malformed string (it was cut there silently: "a\\0b" came out as "a")."""
    consume = f"""
consume:
  - service_id: 0x1234
    instance_id: 1
    eventgroups: [1]
    events: [{{id: 0x8001, layout: {NAMED}}}]
"""
    events = "someip/1234/0001/event/8001"

    def name(text: bytes) -> str:  # 32-bit length, BOM, text (NUL included)
        body = b"\xef\xbb\xbf" + text
        return (len(body).to_bytes(4, "big") + body).hex()

    with (
        daemons("127.0.0.2") as (remote,),
        SomeipPeer.start(
            remote, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001]}
        ) as server,
        gateway(tmp_path, remote.net, consume) as gw,
        mqtt(gw, "dash", events) as dash,
    ):
        wait_state(gw, "running")
        first_message(
            dash,
            lambda: server.send("send", eventgroup=1, event=0x8001, payload=name(b"ok\x00")),
            events,
        )
        server.send("send", eventgroup=1, event=0x8001, payload=name(b"a\x00b\x00"))
        server.send("send", eventgroup=1, event=0x8001, payload=name(b"z\x00"))
        seen = []
        while not seen or seen[-1] != {"name": "z"}:
            got = json.loads(dash.expect_message(unit(10)).payload)
            if got != {"name": "ok"}:  # a late one of the first sends
                seen.append(got)
        assert seen == [{"name": "z"}]
        status = adapter_status(gw)
    assert status["component_stats"]["events_malformed"] == 1
    assert_still_running(status)
