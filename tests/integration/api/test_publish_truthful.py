"""``POST /publish`` (and ``/publish/batch``) answers with the truth about delivery: a
503 means nothing was published, a 202 that the message was published but not stored.

A real gateway (SQLite store, HTTP API on loopback) and a paho subscriber:

- A QoS 1 message whose store write fails once it was routed (the data directory is a
  full tmpfs) was delivered to the subscriber online all the same. Before, the answer
  was 503 ("not acknowledged ... publish again"): a client that retried delivered it
  twice, one that did not believed it unpublished. Now it is 202 with ``stored: false``
  and a ``detail`` saying it was published and not stored; the subscriber has it once.
  Once there is room again the answer is 200 with ``stored: true``.
- A QoS 1 message a bridge would take while its queue cannot be opened (a ``Refusal``
  in its place) was routed to every subscriber, then answered 503 as a failed write.
  Now it is refused before routing, as an MQTT client's is (0x80): 503 "nothing was
  published", and the subscriber gets nothing; in a batch, none of the batch.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.helpers.brokers import free_port
from tests.helpers.gateway import running_gateway
from tests.helpers.small_fs import fill, small_filesystem
from tests.integration.api.support import KEY
from tests.integration.bridge.support import bridge_reply, wait_until
from tests.integration.broker.support import Clients, PahoClient
from tests.integration.components.support import http_of

NOT_STORED = "but not stored: the store could not write it"


def _payloads(sub: PahoClient, count: int) -> list[tuple[str, bytes]]:
    return [(m.topic, bytes(m.payload)) for m in sub.expect_messages(count)]


@pytest.mark.timeout(120)
def test_a_failed_write_after_routing_is_answered_202_published_not_stored(
        tmp_path: Path) -> None:
    config = f"persistence: sqlite\napi: {{keys: ['{KEY}']}}\n"
    with small_filesystem(tmp_path / "data", 4 << 20) as data, \
            running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            keeper = clients.connect(5, "keeper", clean=False,
                                     properties=_session())  # queued for: store writes
            assert keeper.subscribe("q/#", 1) == [1]
            keeper.disconnect()
            sub = clients.subscriber(5, "q/#", 1)
            big = "x" * 600_000
            filler = fill(data)

            reply = http.post("/api/v1/publish", {"topic": "q/one", "payload": big, "qos": 1})
            assert reply.status == 202, reply.text
            result = reply.json()
            assert (result["reached"], result["stored"]) == (2, False), result
            assert result["detail"].startswith("published: routed to 2 subscriber(s)"), result
            assert NOT_STORED in result["detail"], result

            batch: list[dict[str, Any]] = [
                {"topic": "q/b", "payload": f"{i}-" + "y" * 2000, "qos": 1} for i in range(300)]
            batch.append({"topic": "q/zero", "payload": "z"})
            reply = http.post("/api/v1/publish/batch", batch)
            assert reply.status == 202, reply.text
            results = reply.json()
            assert [r["stored"] for r in results] == [False] * 300 + [None]
            assert all(NOT_STORED in r["detail"] for r in results[:300])
            assert results[300]["detail"] is None

            marker = http.post("/api/v1/publish", {"topic": "q/marker", "payload": "m"})
            assert marker.status == 200, marker.text
            # published: the subscriber online has each once (QoS 0 may pass QoS 1 ones)
            expected = [("q/one", big.encode()), *((m["topic"], m["payload"].encode())
                                                   for m in batch), ("q/marker", b"m")]
            assert Counter(_payloads(sub, 303)) == Counter(expected)

            filler.unlink()  # room again: stored, 200
            reply = http.post("/api/v1/publish", {"topic": "q/two", "payload": "2", "qos": 1})
            assert reply.status == 200, reply.text
            assert (reply.json()["stored"], reply.json()["detail"]) == (True, None)
            assert _payloads(sub, 1) == [("q/two", b"2")]
            assert sub.messages.empty()
        finally:
            clients.close_all()


def _session() -> Properties:
    properties = Properties(PacketTypes.CONNECT)
    properties.SessionExpiryInterval = 3600
    return properties


def _bridge_config(port: int) -> str:
    return f"""
api: {{keys: ['{KEY}']}}
persistence: sqlite
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    client_id: gw-api-refusal
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    restart_backoff: 100ms
    restart_backoff_max: 200ms
    forwards:
      - {{local: "fwd/#", remote: "cloud/fwd", qos: 1}}
"""


@pytest.mark.timeout(120)
def test_a_message_a_bridge_cannot_queue_is_refused_503_before_routing(tmp_path: Path) -> None:
    queue = tmp_path / "data" / "bridge" / "cloud" / "queue.db"
    queue.parent.mkdir(parents=True)
    queue.write_bytes(b"this is not a database" * 300)
    with running_gateway(tmp_path, _bridge_config(free_port())) as gw:
        http = http_of(gw)
        wait_until(lambda: bridge_reply(http).get("state"), lambda s: s == "backing_off")
        clients = Clients(gw)
        try:
            sub = clients.subscriber(5, ["fwd/#", "other/#"], 1)

            reply = http.post("/api/v1/publish", {"topic": "fwd/y", "payload": "Y", "qos": 1})
            assert reply.status == 503, reply.text
            assert reply.json()["detail"].endswith("nothing was published"), reply.text
            reply = http.post("/api/v1/publish/batch", [
                {"topic": "other/a", "payload": "A", "qos": 1},
                {"topic": "fwd/z", "payload": "Z", "qos": 2}])
            assert reply.status == 503, reply.text
            assert reply.json()["detail"].startswith("[1].topic: "), reply.text
            assert reply.json()["detail"].endswith("nothing was published"), reply.text
            assert bridge_reply(http)["stats"]["refused_no_queue"] == 2

            # QoS 0 is not refused (the queue would not take it either)
            reply = http.post("/api/v1/publish", {"topic": "fwd/m", "payload": "m"})
            assert reply.status == 200, reply.text
            assert reply.json()["stored"] is None
            reply = http.post("/api/v1/publish", {"topic": "other/b", "payload": "B", "qos": 1})
            assert reply.status == 200, reply.text
            assert reply.json()["stored"] is True
            # QoS 1 messages arrive in order: a refused one delivered would come first
            assert Counter(_payloads(sub, 2)) == Counter([("fwd/m", b"m"), ("other/b", b"B")])
            assert sub.messages.empty()
        finally:
            clients.close_all()
