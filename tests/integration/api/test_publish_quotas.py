"""``/publish`` and ``/publish/batch`` against the broker's quotas: ``$delayed/`` messages
over ``mqtt.max_delayed_messages`` and retained messages over ``max_retained_messages``
/ ``max_retained_bytes`` are refused with 503 naming the limit (MQTT 5's 0x97), and a
batch is checked whole before any of it is published."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients


def _dropped(http: Http, reason: str) -> int:
    return int(http.get("/api/v1/metrics").json()["messages"]["dropped"][reason])


def test_a_batch_over_the_delayed_limit_publishes_none(tmp_path: Path) -> None:
    config = API_CONFIG + "mqtt:\n  max_delayed_messages: 1\n"
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            watcher = clients.paho(5, "watcher")
            watcher.connect()
            watcher.subscribe("batch/#", 1)
            batch = [
                {"topic": "batch/first", "payload": "1", "retain": True},
                {"topic": "$delayed/60/batch/later", "payload": "2"},
                {"topic": "$delayed/60/batch/later2", "payload": "3"},
                {"topic": "batch/last", "payload": "4"},
            ]
            reply = http.post("/api/v1/publish/batch", batch)
            assert reply.status == 503
            assert reply.json() == {
                "detail": "[2].topic: too many delayed messages waiting"
                " (mqtt.max_delayed_messages: 1); nothing was published"
            }
            watcher.expect_no_message()
            assert http.get("/api/v1/retained/batch/first").status == 404
            metrics = http.get("/api/v1/metrics").json()["messages"]
            assert (metrics["delayed"], metrics["dropped"]["delayed_limit"]) == (0, 1)
            assert metrics["received"].get("api", 0) == 0
            # the same batch without the entry too many goes out whole
            reply = http.post("/api/v1/publish/batch", batch[:2] + batch[3:])
            assert reply.status == 200
            got = watcher.expect_messages(2)
            assert [m.topic for m in got] == ["batch/first", "batch/last"]
        finally:
            clients.close_all()


def test_a_batch_over_the_retained_limits_publishes_none(tmp_path: Path) -> None:
    # 64 bytes of topics and payloads, and 240 for each of the 4 topic levels of r/1, r/2
    config = API_CONFIG + "mqtt:\n  max_retained_messages: 2\n  max_retained_bytes: 1024\n"
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            watcher = clients.paho(5, "watcher")
            watcher.connect()
            watcher.subscribe("r/#", 1)
            kept = {"topic": "r/0", "payload": "v0", "retain": True}
            assert http.post("/api/v1/publish", kept).status == 200
            watcher.expect_message()
            batch = [
                {"topic": "r/0", "payload": "v0-again", "retain": True},  # replaces
                {"topic": "r/1", "payload": "v1", "retain": True},  # the 2nd of 2
                {"topic": "r/plain", "payload": "not retained"},
                {"topic": "r/2", "payload": "v2", "retain": True},  # a 3rd: refused
            ]
            reply = http.post("/api/v1/publish/batch", batch)
            assert reply.status == 503
            assert reply.json() == {
                "detail": "[3].retain: not retained, over mqtt.max_retained_messages (2);"
                " nothing was published"
            }
            watcher.expect_no_message()
            assert http.get("/api/v1/retained/r/0").json()["payload"] == "v0"
            assert http.get("/api/v1/retained/r/1").status == 404
            assert _dropped(http, "retained_limit") == 1
            # a clear earlier in the batch makes room for a new topic
            clear = {"topic": "r/0", "payload": "", "retain": True}
            reply = http.post("/api/v1/publish/batch", [clear, *batch[1:]])
            assert reply.status == 200
            assert [r["topic"] for r in reply.json()] == ["r/0", "r/1", "r/plain", "r/2"]
            assert http.get("/api/v1/retained/r/0").status == 404
            assert http.get("/api/v1/retained/r/2").json()["payload"] == "v2"
            watcher.expect_messages(4)
            # bytes: r/1 and r/2 hold 10 bytes and 4 levels (970); 55 more pass 1024
            big = {"topic": "r/1", "payload": "x" * 57, "retain": True}
            reply = http.post("/api/v1/publish/batch", [{"topic": "r/x", "payload": "y"}, big])
            assert reply.status == 503
            assert reply.json()["detail"] == (
                "[1].retain: not retained, over mqtt.max_retained_bytes (1024); nothing was"
                " published"
            )
            watcher.expect_no_message()
            assert http.get("/api/v1/retained/r/1").json()["payload"] == "v1"
        finally:
            clients.close_all()


def test_a_retained_publish_over_the_limit_is_refused(tmp_path: Path) -> None:
    """As an MQTT 5 QoS 1 publisher gets PUBACK 0x97: 503 naming the limit, and the
    message neither retained nor delivered; replacing a retained message still works."""
    config = API_CONFIG + "mqtt:\n  max_retained_messages: 1\n"
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            watcher = clients.paho(5, "watcher")
            watcher.connect()
            watcher.subscribe("r/#", 1)
            first = {"topic": "r/1", "payload": "v", "retain": True, "qos": 1}
            assert http.post("/api/v1/publish", first).status == 200
            watcher.expect_message()
            for qos in (0, 1):
                second = {"topic": "r/2", "payload": "v", "retain": True, "qos": qos}
                reply = http.post("/api/v1/publish", second)
                assert reply.status == 503
                assert reply.json() == {
                    "detail": "retain: not retained, over mqtt.max_retained_messages (1);"
                    " nothing was published"
                }
            watcher.expect_no_message()
            assert http.get("/api/v1/retained/r/2").status == 404
            assert _dropped(http, "retained_limit") == 2
            replace = {"topic": "r/1", "payload": "w", "retain": True}
            assert http.post("/api/v1/publish", replace).status == 200
            assert http.post("/api/v1/publish", {"topic": "r/2", "payload": "v"}).status == 200
            assert [m.payload for m in watcher.expect_messages(2)] == [b"w", b"v"]
        finally:
            clients.close_all()


def test_a_delayed_publish_over_max_delayed_bytes_is_refused(tmp_path: Path) -> None:
    # "$delayed/3600/api/x" is kept as "api/x" (5 bytes) + its payload: 1005 bytes; two
    # fit 2500 bytes, the third would not. A batch is judged whole, as for the count.
    config = API_CONFIG + "mqtt:\n  max_delayed_bytes: 2500\n"
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        message = {"topic": "$delayed/3600/api/x", "payload": "d" * 1000}
        assert http.post("/api/v1/publish", message).status == 200
        reply = http.post("/api/v1/publish/batch", [message, message])
        assert reply.status == 503
        assert reply.json() == {
            "detail": "[1].topic: too many delayed bytes waiting"
            " (mqtt.max_delayed_bytes: 2500); nothing was published"
        }
        metrics = http.get("/api/v1/metrics").json()["messages"]
        assert (metrics["delayed"], metrics["delayed_bytes"]) == (1, 1005)
        assert metrics["dropped"]["delayed_limit"] == 1
        assert http.post("/api/v1/publish", message).status == 200
        reply = http.post("/api/v1/publish", message)
        assert reply.status == 503
        metrics = http.get("/api/v1/metrics").json()["messages"]
        assert (metrics["delayed"], metrics["delayed_bytes"]) == (2, 2010)
        assert metrics["dropped"]["delayed_limit"] == 2
        prometheus = http.get("/metrics").text
        assert "edgebus_delayed_bytes 2010.0" in prometheus
