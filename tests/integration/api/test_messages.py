"""``/publish``, ``/publish/batch``, ``/retained``, ``/subscriptions`` and ``/topics``."""

from __future__ import annotations

import base64
import http.client
import json
from pathlib import Path

import pytest

from broker_core.context import Origin
from gateway.api.app import DRAIN_LIMIT, body_limit
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.broker.support import Clients, SubscribeOptions, publish_props, wait_until


def test_publish_reaches_an_mqtt_subscriber(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    sub = clients.paho(5, "listener")
    sub.connect()
    assert sub.subscribe("plant/#", 2) == [2]
    reply = http.post(
        "/api/v1/publish",
        {
            "topic": "plant/line1/cmd",
            "payload": "start",
            "qos": 1,
            "properties": {
                "content_type": "text/plain",
                "message_expiry_interval": 60,
                "user_properties": [{"name": "by", "value": "api"}],
                "response_topic": "plant/line1/reply",
                "correlation_data": "req-1",
            },
        },
    )
    assert reply.status == 200
    body = reply.json()
    assert (body["topic"], body["reached"], body["delayed"]) == ("plant/line1/cmd", 1, False)
    message = sub.expect_message()
    assert (message.topic, message.payload, message.qos) == ("plant/line1/cmd", b"start", 1)
    assert message.properties is not None
    props = message.properties.json()
    assert props["ContentType"] == "text/plain"
    assert props["UserProperty"] == [("by", "api")]
    assert props["ResponseTopic"] == "plant/line1/reply"
    assert props["CorrelationData"] == b"req-1".hex()
    assert 0 < props["MessageExpiryInterval"] <= 60


def test_publish_binary_payload_as_base64(gw: RunningGateway, http: Http, clients: Clients) -> None:
    sub = clients.paho(4, "bin")
    sub.connect()
    sub.subscribe("bin/#", 0)
    data = bytes(range(256))
    payload = base64.b64encode(data).decode()
    reply = http.post(
        "/api/v1/publish", {"topic": "bin/x", "payload": payload, "encoding": "base64"}
    )
    assert reply.status == 200
    assert sub.expect_message().payload == data


def test_publish_refuses_what_a_client_could_not_publish(http: Http) -> None:
    cases = [
        ({"topic": "a/+/b", "payload": "x"}, 400),
        ({"topic": "a/#", "payload": "x"}, 400),
        ({"topic": "$SYS/brokers/x", "payload": "x"}, 400),
        ({"topic": "$delayed/soon/a", "payload": "x"}, 400),
        ({"topic": "a", "payload": "not base64!", "encoding": "base64"}, 400),
        ({"topic": "a", "payload": "x", "properties": {"response_topic": "r/#"}}, 400),
        ({"topic": "a", "payload": "x", "qos": 3}, 422),
        ({"topic": "", "payload": "x"}, 422),
        ({"topic": "a\u0000b", "payload": "x"}, 422),
        ({"topic": "a", "payload": "x", "colour": "red"}, 422),
        ({"payload": "x"}, 422),
    ]
    for body, status in cases:
        reply = http.post("/api/v1/publish", body)
        assert (body, reply.status) == (body, status)
        assert isinstance(reply.json()["detail"], str | list)
    assert (
        http.post(
            "/api/v1/publish", raw=b"{not json", headers={"Content-Type": "application/json"}
        ).status
        == 422
    )


def test_lone_surrogates_are_refused(http: Http) -> None:
    raw = b'{"topic": "a/\\ud800", "payload": "x"}'
    reply = http.post("/api/v1/publish", raw=raw, headers={"Content-Type": "application/json"})
    assert reply.status == 422
    raw = b'{"topic": "a", "payload": "\\udfff"}'
    reply = http.post("/api/v1/publish", raw=raw, headers={"Content-Type": "application/json"})
    assert reply.status in (400, 422)


def test_payload_and_body_limits(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API_CONFIG + "mqtt:\n  max_packet_size: 2KB\n") as gw:
        http = http_of(gw)
        reply = http.post("/api/v1/publish", {"topic": "big", "payload": "x" * 3000})
        assert reply.status == 413
        assert reply.json()["detail"].startswith("payload: larger than mqtt.max_packet_size")
        # urllib sends the whole body before it reads: the server drains it, then answers
        huge = b'{"topic": "big", "payload": "' + b"x" * (1024 * 1024 + 8000) + b'"}'
        reply = http.post("/api/v1/publish", raw=huge, headers={"Content-Type": "application/json"})
        assert reply.status == 413
        assert reply.json() == {
            "detail": f"request body larger than {2 * 2000 + 1024 * 1024} bytes"
        }
        assert http.post("/api/v1/publish", {"topic": "ok", "payload": "x" * 1000}).status == 200


def early_answer(port: int, headers: dict[str, str]) -> tuple[int, bytes]:
    """Sends a request head announcing a body, reads the answer before sending any of it
    (what curl does for a large body), and returns status and body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=unit(10))
    try:
        connection.putrequest("POST", "/api/v1/publish")
        for name, value in {**bearer(KEY), "Content-Type": "application/json", **headers}.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Length": str(DRAIN_LIMIT + 1)},  # past the drain limit: answered at once
        {"Content-Length": "{too_large}", "Expect": "100-continue"},
    ],
    ids=["past-drain-limit", "expect-continue"],
)
def test_a_body_too_large_is_answered_before_it_is_sent(
    gw: RunningGateway, headers: dict[str, str]
) -> None:
    address = gw.gateway.api_address
    assert address is not None
    too_large = body_limit(gw.broker.limits.max_packet_size) + 1
    assert too_large < DRAIN_LIMIT
    sent = {name: value.format(too_large=too_large) for name, value in headers.items()}
    status, body = early_answer(address[1], sent)
    assert status == 413
    assert json.loads(body)["detail"].startswith("request body larger than")


def chunked_post(port: int, path: str, body: bytes) -> tuple[int, bytes]:
    """POSTs ``body`` with Transfer-Encoding: chunked (no Content-Length), 64 KiB a chunk,
    the whole body before reading the answer (as requests does with a generator)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=unit(10))
    chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
    try:
        headers = {**bearer(KEY), "Content-Type": "application/json"}
        connection.request("POST", path, body=chunks, headers=headers, encode_chunked=True)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_chunked_body_too_large_gets_413(gw: RunningGateway) -> None:
    """As a body whose Content-Length is too large: 413 naming the limit, not FastAPI's
    400 "There was an error parsing the body"; a chunked body within it is served."""
    address = gw.gateway.api_address
    assert address is not None
    limit = body_limit(gw.broker.limits.max_packet_size)
    huge = b'{"topic": "big", "payload": "' + b"x" * (limit + 1) + b'"}'
    for path in ("/api/v1/publish", "/api/v1/publish/batch", "/api/v1/bridges"):
        status, body = chunked_post(address[1], path, huge)
        assert (status, json.loads(body)) == (
            413,
            {"detail": f"request body larger than {limit} bytes"},
        )
    status, body = chunked_post(address[1], "/api/v1/publish", b'{"topic": "ok", "payload": "x"}')
    assert (status, json.loads(body)["topic"]) == (200, "ok")


def _strict_json(text: str) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_422_bodies_are_json_whatever_the_input(http: Http, token: str) -> None:
    """Python's parser takes NaN and Infinity, which JSON has not: echoed back in a 422,
    they are strings."""
    raw = f'{{"topic": "a", "payload": {token}, "qos": {token}}}'.encode()
    reply = http.post("/api/v1/publish", raw=raw, headers={"Content-Type": "application/json"})
    assert reply.status == 422
    detail = _strict_json(reply.text)
    assert isinstance(detail, dict)
    inputs = {(tuple(e["loc"]), e["input"]) for e in detail["detail"]}
    assert inputs == {(("body", "payload"), token), (("body", "qos"), token)}


@pytest.mark.parametrize(
    "body",
    [
        {"topic": "a", "qos": True},
        {"topic": "a", "qos": 1.0},
        {"topic": "a", "retain": "yes"},
        {"topic": "a", "retain": 1},
        {"topic": "a", "payload": 5},
        {"topic": "a", "properties": {"payload_format_indicator": True}},
        {"topic": "a", "properties": {"message_expiry_interval": 10.0}},
    ],
)
def test_publish_types_are_strict(http: Http, body: dict[str, object]) -> None:
    reply = http.post("/api/v1/publish", body)
    assert reply.status == 422
    assert http.post("/api/v1/publish/batch", [body]).status == 422


def test_duplicate_keys_in_a_body_are_refused(http: Http, clients: Clients) -> None:
    sub = clients.paho(5, "dup-watch")
    sub.connect()
    sub.subscribe("dup/#", 1)
    json_type = {"Content-Type": "application/json"}
    for path, raw in (
        ("/api/v1/publish", b'{"topic": "dup/a", "topic": "dup/b"}'),
        (
            "/api/v1/publish",
            b'{"topic": "dup/a", "properties": {"content_type": "a", "content_type": "b"}}',
        ),
        ("/api/v1/publish/batch", b'[{"topic": "dup/a", "qos": 0, "qos": 1}]'),
    ):
        reply = http.post(path, raw=raw, headers=json_type)
        assert reply.status == 422
        [error] = reply.json()["detail"]
        assert error["type"] == "json_invalid"
        assert "appears twice" in error["msg"]
    sub.expect_no_message()
    reply = http.post("/api/v1/publish", raw=b'{"topic": "dup/a"}', headers=json_type)
    assert reply.status == 200


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("topic=a/%23/b", "topic: '#' must be a whole level and the last one"),
        ("topic=a%2B/b", "topic: '+' must be a whole level"),
        ("topic=%24share/g", "topic: malformed shared subscription: '$share/g'"),
        ("matches=a/%23", "matches: a topic name must not contain wildcards (+ or #)"),
        ("matches=a/%2B/b", "matches: a topic name must not contain wildcards (+ or #)"),
    ],
)
def test_subscription_filters_that_are_not_one_are_400(http: Http, query: str, detail: str) -> None:
    """As /retained answers a filter that is not one: 400 naming the parameter, not 200
    with nothing."""
    reply = http.get(f"/api/v1/subscriptions?{query}")
    assert (reply.status, reply.json()) == (400, {"detail": detail})
    assert http.get("/api/v1/retained?topic=a/%23/b").status == 400
    assert http.get("/api/v1/subscriptions?topic=%24share/g/a/%23&matches=a/b").status == 200


def test_delayed_publish(gw: RunningGateway, http: Http, clients: Clients) -> None:
    sub = clients.paho(5, "patient")
    sub.connect()
    sub.subscribe("later/#", 1)
    reply = http.post("/api/v1/publish", {"topic": "$delayed/1/later/x", "payload": "hi", "qos": 1})
    assert reply.status == 200
    assert (reply.json()["topic"], reply.json()["delayed"]) == ("later/x", True)
    message = sub.expect_message(timeout=unit(5))
    assert (message.topic, message.payload) == ("later/x", b"hi")


def test_batch_publishes_in_order(gw: RunningGateway, http: Http, clients: Clients) -> None:
    sub = clients.paho(5, "batch-sub")
    sub.connect()
    sub.subscribe("b/#", 1)
    batch = [{"topic": f"b/{i}", "payload": str(i), "qos": 1} for i in range(5)]
    reply = http.post("/api/v1/publish/batch", batch)
    assert reply.status == 200
    assert [r["reached"] for r in reply.json()] == [1] * 5
    got = sub.expect_messages(5)
    assert [(m.topic, m.payload) for m in got] == [(f"b/{i}", str(i).encode()) for i in range(5)]


def test_a_bad_message_in_a_batch_publishes_none(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    sub = clients.paho(5, "batch-sub2")
    sub.connect()
    sub.subscribe("b/#", 1)
    batch = [{"topic": "b/ok", "payload": "1"}, {"topic": "b/+", "payload": "2"}]
    reply = http.post("/api/v1/publish/batch", batch)
    assert reply.status == 400
    assert reply.json()["detail"].startswith("[1].topic: ")
    sub.expect_no_message()
    assert http.post("/api/v1/publish/batch", []).status == 422
    assert http.post("/api/v1/publish/batch", [{"topic": "b"}] * 1001).status == 422


def test_retained_list_get_and_delete(gw: RunningGateway, http: Http, clients: Clients) -> None:
    pub = clients.paho(5, "retainer")
    pub.connect()
    pub.publish(
        "rooms/kitchen/temp",
        b"21.5",
        qos=1,
        retain=True,
        properties=publish_props(ContentType="text/plain", UserProperty=[("unit", "C")]),
    )
    pub.publish("rooms/hall/raw", b"\xff\x00", qos=1, retain=True)
    http.post("/api/v1/publish", {"topic": "other/x", "payload": "o", "retain": True})

    page = http.get("/api/v1/retained").json()
    assert page["total"] == 3
    assert [m["topic"] for m in page["items"]] == [
        "other/x",
        "rooms/hall/raw",
        "rooms/kitchen/temp",
    ]
    filtered = http.get("/api/v1/retained?topic=rooms/%2B/temp").json()
    assert [m["topic"] for m in filtered["items"]] == ["rooms/kitchen/temp"]
    assert http.get("/api/v1/retained?topic=rooms/%23/x").status == 400

    kitchen = http.get("/api/v1/retained/rooms/kitchen/temp").json()
    assert {k: kitchen[k] for k in ("payload", "encoding", "payload_size", "qos", "origin")} == {
        "payload": "21.5",
        "encoding": "plain",
        "payload_size": 4,
        "qos": 1,
        "origin": {"protocol": "mqtt", "name": "retainer"},
    }
    assert kitchen["properties"]["content_type"] == "text/plain"
    assert kitchen["properties"]["user_properties"] == [{"name": "unit", "value": "C"}]
    raw = http.get("/api/v1/retained/rooms/hall/raw").json()
    assert (raw["payload"], raw["encoding"]) == (base64.b64encode(b"\xff\x00").decode(), "base64")

    assert http.delete("/api/v1/retained/rooms/kitchen/temp").status == 204
    assert http.get("/api/v1/retained/rooms/kitchen/temp").status == 404
    assert http.delete("/api/v1/retained/rooms/kitchen/temp").status == 404
    late = clients.paho(5, "late")
    late.connect()
    late.subscribe("rooms/#", 1)
    assert [m.topic for m in late.expect_messages(1)] == ["rooms/hall/raw"]
    late.expect_no_message()


def test_a_sys_retained_message_cannot_be_deleted(tmp_path: Path) -> None:
    """``$SYS`` topics belong to the broker: DELETE is 400 as a publish there is, and the
    message stays (it answered 204 and deleted it)."""
    with running_gateway(tmp_path, API_CONFIG + "sys: {interval: 60}\n") as gw:
        http = http_of(gw)
        items = http.get("/api/v1/retained?topic=%24SYS/%23&limit=1").json()["items"]
        assert items, "the broker retains its $SYS messages"
        path = "/api/v1/retained/" + items[0]["topic"].replace("$", "%24")
        reply = http.delete(path)
        assert reply.status == 400
        assert reply.json() == {"detail": "topic: $SYS topics belong to the broker"}
        assert http.get(path).status == 200


def test_publishing_an_empty_retained_message_clears_it(http: Http) -> None:
    http.post("/api/v1/publish", {"topic": "gone/soon", "payload": "x", "retain": True})
    assert http.get("/api/v1/retained/gone/soon").status == 200
    http.post("/api/v1/publish", {"topic": "gone/soon", "payload": "", "retain": True})
    assert http.get("/api/v1/retained/gone/soon").status == 404


def test_a_deleted_retained_message_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    config = API_CONFIG + "persistence: sqlite\n"
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        for topic in ("keep/me", "drop/me"):
            body = {"topic": topic, "payload": "v", "qos": 1, "retain": True}
            assert http.post("/api/v1/publish", body).status == 200
        assert http.delete("/api/v1/retained/drop/me").status == 204
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        topics = [m["topic"] for m in http.get("/api/v1/retained").json()["items"]]
        assert topics == ["keep/me"]


def test_subscriptions_of_clients_and_local_subscribers(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    sub = clients.paho(5, "watcher")
    sub.connect()
    sub.subscribe("s/+/t", 1, options=SubscribeOptions(qos=1, noLocal=True, retainHandling=2))
    sub.subscribe("$share/grp/jobs/#", 2)
    local = gw.call(lambda: gw.broker.subscribe(Origin("zmq", "bus"), ["local/#"], qos=1))
    try:
        items = http.get("/api/v1/subscriptions").json()["items"]
        assert items == [
            {
                "clientid": "bus",
                "kind": "zmq",
                "topic": "local/#",
                "share_group": None,
                "qos": 1,
                "no_local": True,
                "retain_as_published": True,
                "retain_handling": 0,
                "subscription_id": None,
            },
            {
                "clientid": "watcher",
                "kind": "mqtt",
                "topic": "$share/grp/jobs/#",
                "share_group": "grp",
                "qos": 2,
                "no_local": False,
                "retain_as_published": False,
                "retain_handling": 0,
                "subscription_id": None,
            },
            {
                "clientid": "watcher",
                "kind": "mqtt",
                "topic": "s/+/t",
                "share_group": None,
                "qos": 1,
                "no_local": True,
                "retain_as_published": False,
                "retain_handling": 2,
                "subscription_id": None,
            },
        ]

        def topics(query: str) -> list[str]:
            return [s["topic"] for s in http.get(f"/api/v1/subscriptions?{query}").json()["items"]]

        assert topics("clientid=watcher&limit=1") == ["$share/grp/jobs/#"]
        assert topics("matches=s/x/t") == ["s/+/t"]
        assert topics("matches=jobs/1") == ["$share/grp/jobs/#"]
        assert topics("share_group=grp") == ["$share/grp/jobs/#"]
        assert topics("kind=zmq") == ["local/#"]
        assert topics("topic=s/%2B/t") == ["s/+/t"]
    finally:
        gw.call(local.close)


def test_topic_tree(gw: RunningGateway, http: Http, clients: Clients) -> None:
    sub = clients.paho(5, "tree")
    sub.connect()
    sub.subscribe("a/+/c", 0)
    sub.subscribe("$share/g/a/b", 0)
    http.post("/api/v1/publish", {"topic": "a/b/c", "payload": "1", "retain": True})
    tree = http.get("/api/v1/topics").json()
    assert tree == {
        "nodes": 5,
        "children": [
            {
                "name": "a",
                "topic": "a",
                "subscriptions": 0,
                "retained": False,
                "children": [
                    {
                        "name": "+",
                        "topic": "a/+",
                        "subscriptions": 0,
                        "retained": False,
                        "children": [
                            {
                                "name": "c",
                                "topic": "a/+/c",
                                "subscriptions": 1,
                                "retained": False,
                                "children": [],
                            }
                        ],
                    },
                    {
                        "name": "b",
                        "topic": "a/b",
                        "subscriptions": 1,
                        "retained": False,
                        "children": [
                            {
                                "name": "c",
                                "topic": "a/b/c",
                                "subscriptions": 0,
                                "retained": True,
                                "children": [],
                            }
                        ],
                    },
                ],
            }
        ],
    }
    below = http.get("/api/v1/topics?root=a/b").json()
    assert [n["topic"] for n in below["children"]] == ["a/b/c"]
    shallow = http.get("/api/v1/topics?depth=1").json()
    assert shallow["children"][0]["children"] == []
    assert http.get("/api/v1/topics?root=x/y").status == 404
    assert http.get("/api/v1/topics?depth=0").status == 422


def test_deep_topics_do_not_break_the_tree(http: Http) -> None:
    # 128 levels: mqtt.max_topic_levels; the tree shows (and reads) 64 of them.
    topic = "/".join(["d"] * 128)
    assert (
        http.post("/api/v1/publish", {"topic": topic, "payload": "x", "retain": True}).status == 200
    )
    reply = http.get("/api/v1/topics?depth=64")
    assert reply.status == 200
    assert reply.json()["nodes"] == 64
    wait_until(lambda: http.get("/api/v1/retained").json()["total"] == 1)
