"""The ``zmq`` adapter against pyzmq peers in their own processes.

Both directions over several mappings of one adapter, MQTT 5 request/response both
ways, XPUB subscriptions on demand, a peer that goes away and comes back, drops
counted at a full publisher, and what a socket that cannot bind does.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from gateway.components import ADAPTER
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.adapters.socket_support import (
    answer_upper_case,
    check_peers_come_back,
    counters,
    ipc_dir,
    mqtt_client,
    state_of,
    tcp_url,
    wait_counter,
    wait_state,
    zmq_peer,
)
from tests.integration.broker.support import publish_props
from tests.integration.components.support import API, http_of, metric, wait_for

__all__ = ["ipc_dir"]  # the fixture, used by name


def test_many_mappings_carry_messages_both_ways(tmp_path: Path, ipc_dir: Path) -> None:
    stack = contextlib.ExitStack()
    pub_url, out_pub_url = tcp_url(), tcp_url()
    config = f"""
adapters:
  - type: zmq
    name: floor
    zmq_to_mqtt:
      - socket: pull
        connect: ipc://{ipc_dir}/in
        to_mqtt: zmq/push/{{zmq.topic}}
      - name: robots
        socket: sub
        connect: {pub_url}
        subscribe: ["robot/"]
        frames: prefix
        delimiter: ":"
        to_mqtt: zmq/pub/{{zmq.topic}}
        qos: 0
    mqtt_to_zmq:
      - from_mqtt: cmd/{{robot}}/{{rest#}}
        socket: push
        bind: ipc://{ipc_dir}/out
        topic: "{{robot}}.{{rest}}"
      - name: telemetry
        from_mqtt: telemetry/#
        socket: pub
        bind: {out_pub_url}
        frames: prefix
        delimiter: " "
        codec: hex
{API}"""
    with (
        stack,
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "watcher") as watcher,
    ):
        watcher.subscribe("zmq/#", 1)  # before the peers send
        push = zmq_peer(
            "push", "--bind", f"ipc://{ipc_dir}/in", "--topic", "sensors/a", "--count", "5"
        )
        pub = zmq_peer(
            "pub",
            "--bind",
            pub_url,
            "--topic",
            "robot/r1",
            "--frames",
            "prefix",
            "--delimiter",
            ":",
        )
        stack.enter_context(push)
        stack.enter_context(pub)
        seen: dict[str, list[bytes]] = {}
        deadline = time.monotonic() + unit(10)
        while len(seen.get("zmq/push/sensors/a", [])) < 5 or "zmq/pub/robot/r1" not in seen:
            assert time.monotonic() < deadline, seen
            message = watcher.expect_message(unit(10))
            seen.setdefault(message.topic, []).append(message.payload)
        assert seen["zmq/push/sensors/a"] == [b"0", b"1", b"2", b"3", b"4"]
        assert all(payload.isdigit() for payload in seen["zmq/pub/robot/r1"])

        with zmq_peer(
            "pull", "--connect", f"ipc://{ipc_dir}/out", "--count", "3", "--print"
        ) as pull:
            pull.expect("ready")
            for i in range(3):
                watcher.publish(f"cmd/r7/arm/{i}", b"go", qos=1)
            frames = [pull.expect("message") for _ in range(3)]
            assert frames == [["r7.arm/0", "go"], ["r7.arm/1", "go"], ["r7.arm/2", "go"]]

        with zmq_peer(
            "sub", "--connect", out_pub_url, "--subscribe", "telemetry/", "--count", "1"
        ) as sub:
            sub.expect("ready")
            # A ZeroMQ subscriber joins late: publish until it has seen one.
            got = None
            while got is None:
                watcher.publish("telemetry/speed", b"01ff", qos=1)  # hex text on MQTT
                try:
                    got = sub.expect("message", timeout=unit(0.2))
                except AssertionError:
                    assert time.monotonic() < deadline + unit(10)
            assert got == ["telemetry/speed \x01\xff"]  # bytes on ZeroMQ

        stats = counters(gw, "floor")
        assert stats["zmq_to_mqtt[0].received"] == 5
        assert stats["zmq_to_mqtt[0].published"] == 5
        assert stats["robots.published"] >= 1
        assert stats["mqtt_to_zmq[0].sent"] == 3
        assert stats["telemetry.sent"] >= 1
        assert stats["telemetry.failed"] == 0
        metrics = http_of(gw).get("/metrics").text
        value = metric(metrics, "edgebus_component_stat", name="floor", stat="mqtt_to_zmq[0].sent")
        assert value == 3
        api = http_of(gw).get("/api/v1/components/adapter/floor").json()
        assert api["component_stats"]["zmq_to_mqtt[0].received"] == 5


@pytest.mark.parametrize("socket", ["req", "dealer"])
def test_mqtt_requests_reach_a_zmq_service(tmp_path: Path, ipc_dir: Path, socket: str) -> None:
    config = f"""
adapters:
  - type: zmq
    name: svc
    mqtt_to_zmq:
      - from_mqtt: svc/echo
        socket: {socket}
        connect: ipc://{ipc_dir}/svc
        timeout: 5s
"""
    with (
        zmq_peer("rep", "--bind", f"ipc://{ipc_dir}/svc") as service,
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "asker") as asker,
    ):
        service.expect("ready")
        asker.subscribe("replies/asker", 1)
        for i in range(10):
            props = publish_props(ResponseTopic="replies/asker", CorrelationData=b"id-%d" % i)
            asker.client.publish("svc/echo", b"q%d" % i, 1, properties=props)
        replies = asker.expect_messages(10, unit(10))
        got = {m.properties.CorrelationData: m.payload for m in replies}
        assert got == {b"id-%d" % i: b"echo:q%d" % i for i in range(10)}
        assert {m.topic for m in replies} == {"replies/asker"}

        asker.publish("svc/echo", b"no response topic", qos=1)  # not a request
        stats = wait_counter(gw, "svc", "mqtt_to_zmq[0].failed", 1)
        assert stats["mqtt_to_zmq[0].sent"] == 10
        assert stats["mqtt_to_zmq[0].published"] == 10


@pytest.mark.parametrize("socket", ["rep", "router"])
def test_a_zmq_front_asks_an_mqtt_responder(tmp_path: Path, ipc_dir: Path, socket: str) -> None:
    config = f"""
adapters:
  - type: zmq
    name: front
    zmq_to_mqtt:
      - socket: {socket}
        bind: ipc://{ipc_dir}/front
        to_mqtt: svc/upper
        response_topic: replies/front
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "responder") as responder:
        responder.subscribe("svc/upper", 1)

        answer_upper_case(responder, "svc/upper")
        data = [arg for word in ("alpha", "beta", "gamma", "delta") for arg in ("--data", word)]
        with zmq_peer(
            "req", "--connect", f"ipc://{ipc_dir}/front", "--parallel", "4", *data
        ) as asker:
            replies = {}
            for _ in range(4):
                line = asker.expect("reply", timeout=unit(10))
                replies[line.lower()] = line
        assert replies == {w: w.upper() for w in ("alpha", "beta", "gamma", "delta")}
        stats = counters(gw, "front")
        assert stats["zmq_to_mqtt[0].received"] == 4
        assert stats["zmq_to_mqtt[0].sent"] == 4
        assert stats["zmq_to_mqtt[0].timeouts"] == 0


def test_a_front_without_responder_answers_empty_after_its_timeout(
    tmp_path: Path, ipc_dir: Path
) -> None:
    config = f"""
adapters:
  - type: zmq
    name: lonely
    zmq_to_mqtt:
      - socket: rep
        bind: ipc://{ipc_dir}/front
        to_mqtt: svc/nobody
        timeout: 300ms
"""
    with (
        running_gateway(tmp_path, config) as gw,
        zmq_peer("req", "--connect", f"ipc://{ipc_dir}/front", "--data", "hello") as asker,
    ):
        assert asker.expect("reply", timeout=unit(10)) == ""
        assert counters(gw, "lonely")["zmq_to_mqtt[0].timeouts"] == 1


def test_xpub_subscriptions_become_mqtt_subscriptions(tmp_path: Path, ipc_dir: Path) -> None:
    config = f"""
adapters:
  - type: zmq
    name: fan
    mqtt_to_zmq:
      - name: robots
        from_mqtt: robots/#
        socket: xpub
        bind: ipc://{ipc_dir}/xpub
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "source") as source:
        wait_state(gw, "fan", "running")

        def filters() -> list[str]:
            adapter = gw.call(lambda: gw.gateway.components.instance(ADAPTER, "fan"))
            return gw.call(lambda: adapter._subscriptions["robots"].filters)

        assert filters() == []
        with zmq_peer(
            "sub", "--connect", f"ipc://{ipc_dir}/xpub", "--subscribe", "robots/r1/", "--count", "2"
        ) as sub:
            wait_for(filters, lambda f: f == ["robots/r1/#"])
            source.publish("robots/r2/pose", b"not for r1", qos=1)
            source.publish("robots/r1/pose", b"one", qos=1)
            source.publish("robots/r1/pose", b"two", qos=1)
            assert sub.expect("message") == ["robots/r1/pose", "one"]
            assert sub.expect("message") == ["robots/r1/pose", "two"]
            assert sub.process.wait(unit(10)) == 0
        # The subscriber is gone: so is the MQTT subscription.
        wait_for(filters, lambda f: f == [])
        stats = counters(gw, "fan")
        assert stats["robots.received"] == 2  # robots/r2 was never subscribed on MQTT
        assert stats["robots.sent"] == 2


def test_a_peer_that_goes_away_is_picked_up_again(tmp_path: Path, ipc_dir: Path) -> None:
    check_peers_come_back(tmp_path, ipc_dir, "zmq")


def test_a_full_subscriber_makes_a_pub_drop_and_count(tmp_path: Path, ipc_dir: Path) -> None:
    """A subscriber that never reads: once its queue and the socket buffers are full, each
    send waits at most ``send_timeout``; what cannot go is dropped and counted."""
    config = f"""
adapters:
  - type: zmq
    name: fullpub
    mqtt_to_zmq:
      - from_mqtt: big/#
        socket: pub
        bind: ipc://{ipc_dir}/pub
        high_water_mark: 10
        send_timeout: 100ms
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "bulk") as bulk:
        with zmq_peer("stall", "--connect", f"ipc://{ipc_dir}/pub") as stall:
            stall.expect("ready")
            wait_counter(gw, "fullpub", "mqtt_to_zmq[0].connected", 1)
            # The subscription travels to the publisher: until it arrives, what the
            # publisher sends goes nowhere. Probes until the peer has read one.
            probes = 0

            def probe() -> dict[str, object] | None:
                nonlocal probes
                bulk.publish("big/probe", b"p", qos=1)
                probes += 1
                return stall.poll(unit(0.2))

            wait_for(probe, lambda line: line is not None and "probed" in line, seconds=30)
            payload = b"x" * 100_000
            for _ in range(100):
                bulk.publish("big/blob", payload, qos=1)
            total = 100 + probes
            stats = wait_for(
                lambda: counters(gw, "fullpub"),
                lambda c: c["mqtt_to_zmq[0].sent"] + c["mqtt_to_zmq[0].dropped"] == total,
                seconds=30,
            )
        assert stats["mqtt_to_zmq[0].dropped"] > 0
        assert stats["mqtt_to_zmq[0].received"] == total


def test_a_socket_that_cannot_bind_backs_off_with_the_reason(tmp_path: Path) -> None:
    config = f"""
adapters:
  - type: zmq
    name: nowhere
    restart_backoff: 30s
    zmq_to_mqtt:
      - socket: pull
        bind: ipc://{tmp_path}/missing-dir/sock
        to_mqtt: x/{{zmq.topic}}
"""
    with running_gateway(tmp_path, config) as gw:
        status = wait_state(gw, "nowhere", "backing_off")
        assert "zmq_to_mqtt[0]: cannot bind" in status["last_error"]
        assert state_of(gw, "nowhere")["restarts"] == 0


def test_a_restart_binds_again_and_the_ipc_file_goes_at_the_end(
    tmp_path: Path, ipc_dir: Path
) -> None:
    config = f"""
adapters:
  - type: zmq
    name: again
    zmq_to_mqtt:
      - socket: pull
        bind: ipc://{ipc_dir}/in
        to_mqtt: in/{{zmq.topic}}
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "op") as op:
        op.subscribe("in/#", 1)
        for round_ in range(2):
            wait_state(gw, "again", "running")
            with zmq_peer("push", "--connect", f"ipc://{ipc_dir}/in", "--topic", f"r{round_}"):
                assert op.expect_message(unit(10)).topic == f"in/r{round_}"
            assert gw.call(lambda: gw.gateway.components.restart(ADAPTER, "again"))
            restarts = round_ + 1
            wait_for(lambda: state_of(gw, "again")["restarts"], lambda n, r=restarts: n == r)
        wait_state(gw, "again", "running")
        assert (ipc_dir / "in").exists()
    assert not (ipc_dir / "in").exists()  # ZeroMQ leaves it; the adapter removes it
