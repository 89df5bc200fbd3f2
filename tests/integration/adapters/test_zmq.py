"""The ``zmq`` adapter against pyzmq peers in their own processes.

Both directions over several mappings of one adapter, MQTT 5 request/response both
ways, XPUB subscriptions on demand, a peer that goes away and comes back, drops
counted at a full publisher, what a socket that cannot bind does, and messages libzmq
discards after reporting them (a late reply, a request without envelope).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

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


class HeldService:
    """A ZeroMQ ``REP`` service on a thread of this process. It holds a request starting
    with ``slow`` until ``release()``, answers it (``late:`` + request), then waits a
    moment before reading on, so that the late reply reaches the asker alone; it answers
    every other request at once with ``echo:`` + request."""

    def __init__(self, url: str) -> None:
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._sock = self._context.socket(zmq.REP)
        self._sock.bind(url)
        self._release = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        sock = self._sock
        while not self._stop.is_set():
            if not sock.poll(50):
                continue
            request = sock.recv()
            if not request.startswith(b"slow"):
                sock.send(b"echo:" + request)
                continue
            while not self._release.wait(0.05):
                if self._stop.is_set():
                    return
            self._release.clear()
            sock.send(b"late:" + request)
            self._stop.wait(unit(0.2))

    def release(self) -> None:
        """Lets the held request's late reply go."""
        self._release.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(unit(10))
        self._sock.close(linger=0)
        self._context.term()


@contextlib.contextmanager
def held_service(url: str) -> Iterator[HeldService]:
    service = HeldService(url)
    try:
        yield service
    finally:
        service.close()


def test_a_late_reply_to_a_timed_out_req_request_is_discarded(
    tmp_path: Path, ipc_dir: Path
) -> None:
    """REQ_CORRELATE drops the late reply after the socket reported it readable; the
    adapter keeps running, counts the timeouts and answers the requests behind them."""
    rounds = 2
    config = f"""
adapters:
  - type: zmq
    name: late
    mqtt_to_zmq:
      - name: ask
        from_mqtt: svc/ask
        socket: req
        connect: ipc://{ipc_dir}/svc
        timeout: {int(unit(2) * 1000)}ms
"""
    with (
        held_service(f"ipc://{ipc_dir}/svc") as service,
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "asker") as asker,
    ):
        asker.subscribe("replies/asker", 1)

        def ask(payload: bytes, correlation: bytes) -> None:
            props = publish_props(ResponseTopic="replies/asker", CorrelationData=correlation)
            asker.client.publish("svc/ask", payload, 1, properties=props)

        for r in range(rounds):
            ask(b"slow%d" % r, b"s%d" % r)
            wait_counter(gw, "late", "ask.timeouts", r + 1)
            ask(b"fast%da" % r, b"f%da" % r)
            ask(b"fast%db" % r, b"f%db" % r)  # queued behind the first one
            # The first fast request is out, waiting behind the held one: let the late
            # reply go while the adapter waits for the fast one's.
            wait_counter(gw, "late", "ask.sent", 3 * r + 2)
            service.release()

        replies = asker.expect_messages(2 * rounds, unit(10))
        got = {m.properties.CorrelationData: m.payload for m in replies}
        expected = {
            b"f%d%s" % (r, x): b"echo:fast%d%s" % (r, x)
            for r in range(rounds)
            for x in (b"a", b"b")
        }
        assert got == expected
        stats = counters(gw, "late")
        assert stats["ask.timeouts"] == rounds
        assert stats["ask.sent"] == 3 * rounds
        assert stats["ask.published"] == 2 * rounds
        status = state_of(gw, "late")
        assert (status["state"], status["restarts"], status["last_error"]) == ("running", 0, None)


def test_a_request_without_envelope_is_counted_and_the_rep_front_goes_on(
    tmp_path: Path, ipc_dir: Path
) -> None:
    """A DEALER's one-frame message has no empty delimiter: the REP socket drops it after
    reporting it readable. The front counts it as failed and serves the next request."""
    url = f"ipc://{ipc_dir}/front"
    config = f"""
adapters:
  - type: zmq
    name: front
    zmq_to_mqtt:
      - name: upper
        socket: rep
        bind: {url}
        to_mqtt: svc/upper
        response_topic: replies/front
"""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    try:
        with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "responder") as responder:
            responder.subscribe("svc/upper", 1)
            answer_upper_case(responder, "svc/upper")
            wait_state(gw, "front", "running")
            dealer.connect(url)
            dealer.send(b"no-envelope")
            wait_for(lambda: counters(gw, "front"), lambda c: c.get("upper.failed") == 1)
            with zmq_peer("req", "--connect", url, "--data", "hello") as asker:
                assert asker.expect("reply", timeout=unit(10)) == "HELLO"
            stats = counters(gw, "front")
            assert (stats["upper.received"], stats["upper.failed"], stats["upper.sent"]) == (
                2,
                1,
                1,
            )
            status = state_of(gw, "front")
            assert (status["state"], status["restarts"], status["last_error"]) == (
                "running",
                0,
                None,
            )
    finally:
        dealer.close(linger=0)
        context.term()


def test_an_ipc_path_a_live_process_serves_is_not_taken_over(
    tmp_path: Path, ipc_dir: Path
) -> None:
    # libzmq's bind unlinks whatever socket file is at the path and binds its own: the
    # other service's messages would come here, and its file be removed at stop.
    url = f"ipc://{ipc_dir}/svc"
    config = f"""
adapters:
  - type: zmq
    name: clash
    restart_backoff: 30s
    zmq_to_mqtt:
      - socket: pull
        bind: {url}
        to_mqtt: x/{{zmq.topic}}
"""
    with zmq_peer("pull", "--bind", url, "--count", "1", "--print") as service:
        service.expect("ready")
        with running_gateway(tmp_path, config) as gw:
            status = wait_state(gw, "clash", "backing_off")
            assert f"zmq_to_mqtt[0]: cannot bind {url}" in status["last_error"]
            assert "another process is serving it" in status["last_error"]
            with zmq_peer("push", "--connect", url, "--topic", "jobs", "--count", "1") as client:
                client.expect("sent", timeout=unit(30))
                assert service.expect("message", timeout=unit(30)) == ["jobs", "0"]
        assert Path(f"{ipc_dir}/svc").is_socket()  # the gateway's stop left it alone


def test_a_stale_ipc_socket_file_is_replaced(tmp_path: Path, ipc_dir: Path) -> None:
    # Left by a process that is gone (kill -9): nothing accepts on it, so binding it is
    # not taking anyone's address.
    import socket as unix

    path = ipc_dir / "stale"
    left = unix.socket(unix.AF_UNIX, unix.SOCK_STREAM)
    left.bind(str(path))
    left.listen()
    left.close()
    assert path.is_socket()
    config = f"""
{API.strip()}
adapters:
  - type: zmq
    name: again
    zmq_to_mqtt:
      - socket: pull
        bind: ipc://{path}
        to_mqtt: x/{{zmq.topic}}
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "watcher") as watcher:
        assert watcher.subscribe("x/#", 1) == [1]
        wait_state(gw, "again", "running")
        with zmq_peer("push", "--connect", f"ipc://{path}", "--topic", "jobs") as client:
            client.expect("sent", timeout=unit(30))
            assert watcher.expect_message(unit(10)).topic == "x/jobs"
