"""Bridges added, paused, resumed, changed and deleted through the HTTP API while traffic
flows; their state in the API, in /metrics and as $SYS events."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import Collector, Remote, paho_client, settles, wait_until
from tests.integration.components.support import API, http_of, metric


class Ticker(threading.Thread):
    """Publishes ``flow/x`` QoS 1 with a number, every few milliseconds, until stopped."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.client = paho_client("ticker")
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        self.number = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.number += 1
            self.client.publish("flow/x", str(self.number), qos=1).wait_for_publish(unit(5))
            time.sleep(0.005)

    def stop(self) -> None:
        self.halt.set()
        self.join(unit(5))
        self.client.disconnect()
        self.client.loop_stop()


def _body(remote: Remote, target: str) -> dict[str, object]:
    return {
        "name": "cloud",
        "server": f"127.0.0.1:{remote.port}",
        "reconnect_backoff": "100ms",
        "forwards": [{"local": "flow/{rest#}", "remote": f"{target}/{{rest}}"}],
    }


def test_add_pause_resume_update_delete_while_traffic_flows(tmp_path: Path) -> None:
    with Remote(tmp_path / "remote") as remote, running_gateway(tmp_path, API) as gw:
        http = http_of(gw)
        cloud = Collector(remote.port, "#", "cloud-sub")
        events: list[tuple[str, dict[str, object]]] = []
        watcher = paho_client("sys-watcher")
        watcher.on_message = lambda c, u, m: events.append((m.topic, json.loads(m.payload)))
        watcher.connect("127.0.0.1", gw.port)
        watcher.subscribe("$SYS/brokers/+/bridges/#", 0)
        watcher.loop_start()
        ticker = Ticker(gw.port)
        ticker.start()
        try:
            reply = http.post("/api/v1/bridges", _body(remote, "one"))
            assert reply.status == 201, reply.text
            assert reply.json()["name"] == "cloud"
            assert http.post("/api/v1/bridges", _body(remote, "one")).status == 409
            wait_until(
                lambda: http.get("/api/v1/bridges/cloud").json()["state"], lambda s: s == "running"
            )
            wait_until(cloud.count, lambda n: n >= 20)

            assert http.post("/api/v1/bridges/cloud/pause").status == 200
            wait_until(
                lambda: http.get("/api/v1/bridges/cloud").json()["state"], lambda s: s == "paused"
            )
            # Paused: while the ticker goes on, the count stops growing once what was on
            # its way when the pause took effect has landed.
            quiet = settles(cloud.count)

            assert http.post("/api/v1/bridges/cloud/resume").status == 200
            wait_until(cloud.count, lambda n: n >= quiet + 20)

            reply = http.request("PUT", "/api/v1/bridges/cloud", _body(remote, "two"))
            assert reply.status == 200, reply.text
            wait_until(
                lambda: [t for t, _ in cloud.messages if t.startswith("two/")],
                lambda m: len(m) >= 20,
            )
            view = http.get("/api/v1/bridges/cloud").json()
            assert view["link"]["link"] == "connected"
            assert view["config"]["forwards"] == ["flow/{rest#}"]
            assert view["stats"]["sent"] >= 20 and view["stats"]["queue_depth"] >= 0

            text = http.get("/metrics").text
            assert metric(text, "edgebus_bridge_up", bridge="cloud") == 1
            assert (
                metric(
                    text, "edgebus_component_stat", kind="bridge", name="cloud", stat="connected"
                )
                == 1
            )
            assert (
                metric(
                    text, "edgebus_component_stat", kind="bridge", name="cloud", stat="queue_depth"
                )
                >= 0
            )

            assert http.delete("/api/v1/bridges/cloud").status == 204
            assert http.get("/api/v1/bridges/cloud").status == 404
            assert http.delete("/api/v1/bridges/cloud").status == 404
            # The ticker goes on publishing: a count that stops growing means nothing
            # is forwarded any more.
            settles(cloud.count)
        finally:
            ticker.stop()
            watcher.disconnect()
            watcher.loop_stop()
            cloud.close()
    kinds = [topic.rsplit("/", 1)[1] for topic, _ in events]
    assert kinds.count("connected") >= 3  # added, resumed, updated
    assert kinds.count("disconnected") >= 3  # paused, updated, deleted
    first = next(body for topic, body in events if topic.endswith("/connected"))
    assert first["bridge"] == "cloud" and first["server"] == f"127.0.0.1:{remote.port}"


def test_a_bad_bridge_is_refused_with_every_problem(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API) as gw:
        http = http_of(gw)
        reply = http.post(
            "/api/v1/bridges",
            {"name": "bad", "server": "nowhere", "forwards": [{"local": "a/{x}", "qos": 3}]},
        )
        assert reply.status == 422
        detail = reply.json()["detail"]
        assert any(line.startswith("server:") for line in detail)
        assert any(line.startswith("forwards[0].qos:") for line in detail)
        assert http.get("/api/v1/bridges").json() == []
        assert http.request("PUT", "/api/v1/bridges/nope", {"name": "nope"}).status == 404
        assert http.post("/api/v1/bridges/nope/pause").status == 404


def test_the_files_a_bridge_names_are_checked_as_edgebus_check_does(tmp_path: Path) -> None:
    """A bridge whose TLS files cannot be loaded is refused (422 naming the field), on
    POST and PUT, as ``edgebus check`` refuses it in a file, instead of running degraded."""
    not_pem = tmp_path / "not-a-ca.pem"
    not_pem.write_text("not a certificate\n")
    missing = tmp_path / "missing" / "ca.pem"
    entry = {"name": "lab", "server": "127.0.0.1:1", "forwards": [{"local": "lab/#"}]}
    with running_gateway(tmp_path, API) as gw:
        http = http_of(gw)
        reply = http.post("/api/v1/bridges", {**entry, "tls": {"cafile": str(missing)}})
        assert reply.status == 422
        assert reply.json()["detail"] == [
            f"tls.cafile: cannot read {str(missing)!r}: No such file or directory"
        ]
        reply = http.post("/api/v1/bridges", {**entry, "tls": {"cafile": str(not_pem)}})
        assert reply.status == 422
        [line] = reply.json()["detail"]
        assert line.startswith("tls.cafile: ")
        assert http.get("/api/v1/bridges").json() == []
        assert http.post("/api/v1/bridges", entry).status == 201
        reply = http.request(
            "PUT", "/api/v1/bridges/lab", {**entry, "tls": {"cafile": str(missing)}}
        )
        assert reply.status == 422
        assert reply.json()["detail"] == [
            f"tls.cafile: cannot read {str(missing)!r}: No such file or directory"
        ]
        assert http.get("/api/v1/bridges/lab").json()["config"]["tls"] is False


def test_a_put_naming_another_bridge_is_400_as_for_rules(tmp_path: Path) -> None:
    entry = {"name": "b1", "server": "127.0.0.1:1", "forwards": [{"local": "a"}]}
    rule = {"name": "r1", "sql": 'SELECT * FROM "a"', "actions": [{"type": "log"}]}
    with running_gateway(tmp_path, API) as gw:
        http = http_of(gw)
        assert http.post("/api/v1/bridges", entry).status == 201
        assert http.post("/api/v1/rules", rule).status == 201
        bridge = http.request("PUT", "/api/v1/bridges/b1", {**entry, "name": "zz"})
        rules = http.request("PUT", "/api/v1/rules/r1", {**rule, "name": "zz"})
        assert (bridge.status, rules.status) == (400, 400)
        assert bridge.json() == {"detail": "the body names the bridge 'zz', the path 'b1'"}
        assert [b["name"] for b in http.get("/api/v1/bridges").json()] == ["b1"]
