"""The ``nng`` adapter against pynng peers in their own processes.

Both directions over several mappings of one adapter (tcp, ipc and ws transports,
NanoMQ's ``topic/payload`` format), MQTT 5 request/response both ways with concurrent
requests, a peer that goes away and comes back, and a socket that cannot listen.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from tests.helpers.brokers import free_port
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.adapters.socket_support import (
    answer_upper_case,
    check_peers_come_back,
    counters,
    ipc_dir,
    mqtt_client,
    nng_peer,
    tcp_url,
    wait_counter,
    wait_state,
)
from tests.integration.broker.support import publish_props
from tests.integration.components.support import API, http_of, metric

__all__ = ["ipc_dir"]  # the fixture, used by name


def test_many_mappings_carry_messages_both_ways(tmp_path: Path, ipc_dir: Path) -> None:
    pub_url, ws_url = tcp_url(), f"ws://127.0.0.1:{free_port()}/out"
    config = f"""
adapters:
  - type: nng
    name: cell
    nng_to_mqtt:
      - socket: pull0
        bind: ipc://{ipc_dir}/in
        delimiter: ":"
        to_mqtt: nng/push/{{nng.topic}}
      - name: nanomq
        socket: sub0
        connect: {pub_url}
        subscribe: [remote/nng]
        to_mqtt: nng/sub/{{nng.topic}}
        qos: 0
    mqtt_to_nng:
      - from_mqtt: cmd/#
        socket: push0
        bind: ipc://{ipc_dir}/out
      - name: websocket
        from_mqtt: ws/{{device}}
        socket: push0
        bind: {ws_url}
        topic: "{{device}}"
        delimiter: "|"
        codec: json
{API}"""
    with contextlib.ExitStack() as stack:
        gw = stack.enter_context(running_gateway(tmp_path, config))
        watcher = stack.enter_context(mqtt_client(gw, "watcher"))
        watcher.subscribe("nng/#", 1)  # before the peers send
        stack.enter_context(
            nng_peer(
                "push",
                "--connect",
                f"ipc://{ipc_dir}/in",
                "--topic",
                "sensors/a",
                "--delimiter",
                ":",
                "--count",
                "5",
            )
        )
        stack.enter_context(nng_peer("pub", "--bind", pub_url, "--topic", "remote/nng"))
        seen: dict[str, list[bytes]] = {}
        deadline = time.monotonic() + unit(10)
        while len(seen.get("nng/push/sensors/a", [])) < 5 or "nng/sub/remote/nng" not in seen:
            assert time.monotonic() < deadline, seen
            message = watcher.expect_message(unit(10))
            seen.setdefault(message.topic, []).append(message.payload)
        assert seen["nng/push/sensors/a"] == [b"0", b"1", b"2", b"3", b"4"]
        assert all(payload.isdigit() for payload in seen["nng/sub/remote/nng"])

        with nng_peer(
            "pull", "--connect", f"ipc://{ipc_dir}/out", "--count", "2", "--print"
        ) as pull:
            pull.expect("ready")
            watcher.publish("cmd/r7/arm", b"up", qos=1)
            watcher.publish("cmd/r7/leg", b"down", qos=1)
            assert pull.expect("message") == "cmd/r7/arm/up"  # NanoMQ: topic/payload
            assert pull.expect("message") == "cmd/r7/leg/down"

        with nng_peer("pull", "--connect", ws_url, "--count", "1", "--print") as pull:
            pull.expect("ready")
            watcher.publish("ws/dev9", b'{"on": true}', qos=1)
            assert pull.expect("message", timeout=unit(10)) == 'dev9|{"on": true}'
            watcher.publish("ws/dev9", b"not json", qos=1)  # the json codec refuses it

        stats = wait_counter(gw, "cell", "websocket.failed", 1)
        assert stats["nng_to_mqtt[0].published"] == 5
        assert stats["nanomq.published"] >= 1
        assert stats["mqtt_to_nng[0].sent"] == 2
        assert stats["websocket.sent"] == 1
        metrics = http_of(gw).get("/metrics").text
        value = metric(metrics, "edgebus_component_stat", name="cell", stat="websocket.failed")
        assert value == 1


def test_pair_sockets_both_ways(tmp_path: Path, ipc_dir: Path) -> None:
    config = f"""
adapters:
  - type: nng
    name: pairs
    nng_to_mqtt:
      - socket: pair1
        bind: ipc://{ipc_dir}/in
        frames: raw
        to_mqtt: pair/in
    mqtt_to_nng:
      - from_mqtt: pair/out/#
        socket: pair0
        bind: ipc://{ipc_dir}/out
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "op") as op:
        op.subscribe("pair/in", 1)
        with nng_peer(
            "pull",
            "--socket",
            "pair0",
            "--connect",
            f"ipc://{ipc_dir}/out",
            "--count",
            "2",
            "--print",
        ) as pull:
            pull.expect("ready")
            wait_counter(gw, "pairs", "mqtt_to_nng[0].connected", 1)
            op.publish("pair/out/a", b"1", qos=1)
            op.publish("pair/out/b", b"2", qos=1)
            assert pull.expect("message") == "pair/out/a/1"
            assert pull.expect("message") == "pair/out/b/2"
        with nng_peer(
            "push", "--socket", "pair1", "--connect", f"ipc://{ipc_dir}/in", "--raw", "--count", "3"
        ):
            got = [op.expect_message(unit(10)).payload for _ in range(3)]
        assert got == [b"0", b"1", b"2"]


def test_mqtt_requests_reach_an_nng_service(tmp_path: Path, ipc_dir: Path) -> None:
    config = f"""
adapters:
  - type: nng
    name: svc
    mqtt_to_nng:
      - from_mqtt: svc/echo
        socket: req0
        connect: ipc://{ipc_dir}/svc
        max_inflight: 8
"""
    with (
        nng_peer("rep", "--bind", f"ipc://{ipc_dir}/svc") as service,
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "asker") as asker,
    ):
        service.expect("ready")
        wait_state(gw, "svc", "running")
        asker.subscribe("replies/asker", 1)
        for i in range(20):
            props = publish_props(ResponseTopic="replies/asker", CorrelationData=b"id-%d" % i)
            asker.client.publish("svc/echo", b"q%d" % i, 1, properties=props)
        replies = asker.expect_messages(20, unit(10))
        got = {m.properties.CorrelationData: m.payload for m in replies}
        assert got == {b"id-%d" % i: b"echo:q%d" % i for i in range(20)}
        stats = counters(gw, "svc")
        assert stats["mqtt_to_nng[0].published"] == 20
        assert stats["mqtt_to_nng[0].timeouts"] == 0


def test_an_nng_front_asks_an_mqtt_responder(tmp_path: Path, ipc_dir: Path) -> None:
    config = f"""
adapters:
  - type: nng
    name: front
    nng_to_mqtt:
      - socket: rep0
        bind: ipc://{ipc_dir}/front
        to_mqtt: svc/upper
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "responder") as responder:
        responder.subscribe("svc/upper", 1)

        answer_upper_case(responder, "svc/upper")
        words = [f"word{i}" for i in range(8)]
        data = [arg for word in words for arg in ("--data", word)]
        with nng_peer(
            "req", "--connect", f"ipc://{ipc_dir}/front", "--parallel", "8", *data
        ) as asker:
            replies = {}
            for _ in words:
                line = asker.expect("reply", timeout=unit(10))
                replies[line.lower()] = line
        assert replies == {w: w.upper() for w in words}
        stats = counters(gw, "front")
        assert stats["nng_to_mqtt[0].published"] == 8
        assert stats["nng_to_mqtt[0].sent"] == 8


def test_a_peer_that_goes_away_is_picked_up_again(tmp_path: Path, ipc_dir: Path) -> None:
    check_peers_come_back(tmp_path, ipc_dir, "nng")


def test_a_socket_that_cannot_listen_backs_off_with_the_reason(tmp_path: Path) -> None:
    config = f"""
adapters:
  - type: nng
    name: nowhere
    restart_backoff: 30s
    nng_to_mqtt:
      - socket: pull0
        bind: ipc://{tmp_path}/missing-dir/sock
        to_mqtt: x/{{nng.topic}}
"""
    with running_gateway(tmp_path, config) as gw:
        status = wait_state(gw, "nowhere", "backing_off")
        assert "nng_to_mqtt[0]: cannot listen" in status["last_error"]
