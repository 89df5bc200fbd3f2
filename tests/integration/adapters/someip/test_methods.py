"""Method calls both ways between MQTT 5 request/response and someipy apps on another
daemon: responses, SOME/IP error codes, timeouts, payloads that do not fit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers.someip import SomeipPeer, daemons
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import adapter_status, gateway, mqtt, wait_state
from tests.integration.broker.support import PahoClient, publish_props

PAIR = "{type: struct, fields: [{name: a, type: uint8}, {name: b, type: uint8}]}"

CONSUME = f"""
max_pending_calls: 1
consume:
  - service_id: 0x1234
    instance_id: 1
    timeout: 1s
    methods:
      - 1
      - 2
      - 3
      - {{id: 4, request_layout: {PAIR}, response_layout: {PAIR}}}
"""


def request(client: PahoClient, method: int, payload: bytes, correlation: bytes) -> None:
    props = publish_props(ResponseTopic="replies/dash", CorrelationData=correlation)
    client.publish(f"someip/1234/0001/method/{method:04x}", payload, qos=1, properties=props)


def reply(client: PahoClient, correlation: bytes) -> tuple[int, bytes]:
    """(someip.return_code, payload) of the response carrying ``correlation``."""
    while True:
        message = client.expect_message(unit(10))
        if message.properties.CorrelationData == correlation:
            codes = dict(message.properties.UserProperty)
            return int(codes["someip.return_code"]), message.payload


def test_mqtt_requests_call_the_methods_of_a_remote_service(tmp_path: Path) -> None:
    methods = {1: "reverse", 2: "error:0x03", 3: "sleep:5", 4: "reverse"}
    with (
        daemons("127.0.0.2") as (remote,),
        SomeipPeer.start(remote, role="server", service=0x1234, instance=1, methods=methods),
        gateway(tmp_path, remote.net, CONSUME) as gw,
    ):
        wait_state(gw, "running")
        with mqtt(gw, "dash", "replies/dash") as dash:
            request(dash, 1, b"\x01\x02\x03", b"c1")
            assert reply(dash, b"c1") == (0, b"\x03\x02\x01")
            # The service's error code comes back, with an error payload.
            request(dash, 2, b"", b"c2")
            code, payload = reply(dash, b"c2")
            assert code == 3
            assert json.loads(payload)["error"] == "E_UNKNOWN_METHOD"
            # Typed both ways.
            request(dash, 4, b'{"a": 1, "b": 2}', b"c4")
            code, payload = reply(dash, b"c4")
            assert (code, json.loads(payload)) == (0, {"a": 2, "b": 1})
            # A request that does not fit is answered at once, naming the field.
            request(dash, 4, b'{"a": 1, "b": 300}', b"c5")
            code, payload = reply(dash, b"c5")
            assert code == 9
            assert json.loads(payload) == {
                "error": "E_MALFORMED_MESSAGE",
                "return_code": 9,
                "detail": "request $.b: expected an integer from 0 to 255 (uint8), got 300",
            }
            # A call that takes longer than `timeout` is answered with an error.
            request(dash, 3, b"x", b"c3")
            code, payload = reply(dash, b"c3")
            assert code == 6
            assert json.loads(payload)["detail"] == "no response within 1s"
            # That call holds its place until the service answers (or someipy gives up):
            # with max_pending_calls 1, the next request is refused at once.
            request(dash, 1, b"x", b"c6")
            code, payload = reply(dash, b"c6")
            assert (code, json.loads(payload)["detail"]) == (4, "too many calls in progress")
        stats = adapter_status(gw)["component_stats"]
    assert stats["calls"] == 4
    assert stats["call_timeouts"] == 1
    assert stats["requests_malformed"] == 1
    assert stats["calls_refused"] == 1


OFFER = f"""
offer:
  - service_id: 0x2000
    instance_id: 3
    ttl: 3s
    cyclic_offer_delay: 500ms
    timeout: 1s
    methods:
      - {{id: 1, request_layout: {PAIR}, response_layout: {PAIR}}}
      - 2
"""


def call(ecu: SomeipPeer, method: int, payload: str, call_id: str) -> None:
    ecu.send("call", method=method, payload=payload, id=call_id)


def result(ecu: SomeipPeer, call_id: str) -> dict[str, Any]:
    return ecu.wait("result", lambda r: r["id"] == call_id, timeout=unit(15))


def answer(responder: PahoClient, payload: bytes, **user: str) -> dict[str, Any]:
    """Answers the next request the responder receives; the request as JSON."""
    message = responder.expect_message(unit(10))
    props = publish_props(
        CorrelationData=message.properties.CorrelationData, UserProperty=list(user.items())
    )
    responder.publish(message.properties.ResponseTopic, payload, qos=1, properties=props)
    body: dict[str, Any] = json.loads(message.payload)
    return body


def test_an_mqtt_responder_answers_the_methods_of_an_offered_service(tmp_path: Path) -> None:
    with daemons("127.0.0.2") as (remote,), gateway(tmp_path, remote.net, OFFER) as gw:
        wait_state(gw, "running")
        with (
            SomeipPeer.start(
                remote, role="client", service=0x2000, instance=3, methods={1: "", 2: ""}
            ) as ecu,
            mqtt(gw, "responder", "someip/2000/0003/method/0001") as responder,
        ):
            ecu.wait("available")
            call(ecu, 1, "0102", "r1")
            assert answer(responder, b'{"a": 9, "b": 8}') == {"a": 1, "b": 2}
            assert result(ecu, "r1") == {
                "ev": "result",
                "id": "r1",
                "code": 0,
                "payload": "0908",
            }
            # The responder reports an error code (a name or a number).
            call(ecu, 1, "0102", "r2")
            answer(responder, b"", **{"someip.return_code": "E_NOT_OK"})
            assert result(ecu, "r2")["code"] == 1
            # A response that does not fit the response layout: E_NOT_OK.
            call(ecu, 1, "0102", "r3")
            answer(responder, b'{"a": 1}')
            assert result(ecu, "r3")["code"] == 1
            # A request that does not fit the request layout: E_MALFORMED_MESSAGE.
            call(ecu, 1, "01", "r4")
            assert result(ecu, "r4")["code"] == 9
            # No answer in time: E_NOT_OK after `timeout`.
            call(ecu, 1, "0102", "r5")
            responder.expect_message(unit(10))
            assert result(ecu, "r5")["code"] == 1
            # Nobody subscribed to method 2's requests: E_NOT_READY at once.
            call(ecu, 2, "00", "r6")
            assert result(ecu, "r6")["code"] == 4
        stats = adapter_status(gw)["component_stats"]
    assert stats["answers"] == 2
    assert stats["answers_malformed"] == 1
    assert stats["answer_timeouts"] == 1
    assert stats["answers_missing"] == 1
    assert stats["requests_malformed"] == 1
