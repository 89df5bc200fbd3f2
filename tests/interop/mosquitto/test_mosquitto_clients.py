"""Debian's mosquitto_pub / mosquitto_sub (libmosquitto 2.0) against the in-process broker:
MQTT 3.1.1 and 5.0, QoS 0/1/2, retained messages, wills, persistent sessions, MQTT 5
properties."""

from __future__ import annotations

import pytest

from tests.helpers.gateway import RunningGateway
from tests.interop.mosquitto.tools import MosquittoSub, mosquitto_pub, run_args

pytestmark = pytest.mark.interop

VERSIONS = pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])


@VERSIONS
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_and_subscribe(address: tuple[str, int], version: str, qos: int) -> None:
    host, port = address
    with MosquittoSub(host, port, *run_args(version, qos), "-t", "m/#", "-C", "2") as sub:
        sub.wait_subscribed()
        mosquitto_pub(host, port, *run_args(version, qos), "-t", "m/one", "-m", "first")
        mosquitto_pub(host, port, *run_args(version, qos), "-t", "m/two", "-m", "second")
        got = sub.expect_messages(2)
        assert [(m.topic, m.qos, m.retain, m.payload) for m in got] == [
            ("m/one", qos, False, "first"),
            ("m/two", qos, False, "second"),
        ]
        assert sub.wait_exit() == 0


@pytest.mark.parametrize(
    ("pub_version", "sub_version"), [("mqttv5", "mqttv311"), ("mqttv311", "mqttv5")]
)
def test_across_protocol_versions(
    address: tuple[str, int], pub_version: str, sub_version: str
) -> None:
    host, port = address
    with MosquittoSub(host, port, *run_args(sub_version, 2), "-t", "x/+", "-C", "1") as sub:
        sub.wait_subscribed()
        mosquitto_pub(host, port, *run_args(pub_version, 2), "-t", "x/y", "-m", "across")
        message = sub.expect_message()
        assert (message.topic, message.qos, message.payload) == ("x/y", 2, "across")


@VERSIONS
def test_qos_is_the_lower_of_publish_and_subscription(
    address: tuple[str, int], version: str
) -> None:
    host, port = address
    with MosquittoSub(host, port, *run_args(version, 1), "-t", "d/t", "-C", "1") as sub:
        sub.wait_subscribed()
        mosquitto_pub(host, port, *run_args(version, 2), "-t", "d/t", "-m", "down")
        assert sub.expect_message().qos == 1


@VERSIONS
def test_many_messages_from_stdin_arrive_in_order(address: tuple[str, int], version: str) -> None:
    host, port = address
    lines = [f"line {i}" for i in range(200)]
    with MosquittoSub(host, port, *run_args(version, 1), "-t", "l/t", "-C", "200") as sub:
        sub.wait_subscribed()
        mosquitto_pub(
            host, port, *run_args(version, 1), "-t", "l/t", "-l", stdin="\n".join(lines) + "\n"
        )
        assert [m.payload for m in sub.expect_messages(200)] == lines
        assert sub.wait_exit() == 0


@VERSIONS
def test_retained_message(address: tuple[str, int], version: str) -> None:
    host, port = address
    mosquitto_pub(host, port, *run_args(version, 1), "-r", "-t", "r/t", "-m", "kept")
    with MosquittoSub(
        host, port, *run_args(version, 1), "-t", "r/#", "-C", "2", client_id="r1"
    ) as sub:
        sub.wait_subscribed()
        retained = sub.expect_message()
        assert (retained.topic, retained.retain, retained.payload) == ("r/t", True, "kept")
        mosquitto_pub(host, port, *run_args(version, 1), "-t", "r/t", "-m", "live")
        live = sub.expect_message()
        assert (live.retain, live.payload) == (False, "live")
    # -r -n: a zero-length retained message clears it.
    mosquitto_pub(host, port, *run_args(version, 1), "-r", "-n", "-t", "r/t")
    with MosquittoSub(
        host, port, *run_args(version, 1), "-t", "r/#", "-C", "1", client_id="r2"
    ) as sub:
        sub.wait_subscribed()
        mosquitto_pub(host, port, *run_args(version, 1), "-t", "r/other", "-m", "first after clear")
        message = sub.expect_message()
        assert (message.topic, message.retain) == ("r/other", False)


@VERSIONS
def test_will_of_a_killed_mosquitto_sub(address: tuple[str, int], version: str) -> None:
    host, port = address
    with MosquittoSub(
        host, port, *run_args(version, 1), "-t", "will/#", "-C", "1", client_id="watch"
    ) as watcher:
        watcher.wait_subscribed()
        with MosquittoSub(
            host,
            port,
            *run_args(version, 0),
            "-t",
            "anything/t",
            "--will-topic",
            "will/dying",
            "--will-payload",
            "died",
            "--will-qos",
            "1",
            client_id="dying",
        ) as dying:
            dying.wait_subscribed()
            dying.kill()  # SIGKILL: no DISCONNECT
        will = watcher.expect_message()
        assert (will.topic, will.qos, will.payload) == ("will/dying", 1, "died")


@VERSIONS
def test_will_retain_of_a_killed_mosquitto_sub(address: tuple[str, int], version: str) -> None:
    host, port = address
    with MosquittoSub(
        host,
        port,
        *run_args(version, 0),
        "-t",
        "anything/t",
        "--will-topic",
        "will/kept",
        "--will-payload",
        "offline",
        "--will-retain",
        client_id="dying",
    ) as dying:
        dying.wait_subscribed()
        dying.kill()
    with MosquittoSub(
        host, port, *run_args(version, 1), "-t", "will/kept", "-C", "1", client_id="late"
    ) as late:
        late.wait_subscribed()
        message = late.expect_message()
        assert (message.retain, message.payload) == (True, "offline")


@VERSIONS
def test_no_will_when_mosquitto_sub_exits_normally(address: tuple[str, int], version: str) -> None:
    host, port = address
    with MosquittoSub(
        host, port, *run_args(version, 1), "-t", "will/#", "-C", "1", client_id="watch"
    ) as watcher:
        watcher.wait_subscribed()
        with MosquittoSub(
            host,
            port,
            *run_args(version, 1),
            "-t",
            "done/t",
            "-C",
            "1",
            "--will-topic",
            "will/normal",
            "--will-payload",
            "should not be sent",
            client_id="normal",
        ) as normal:
            normal.wait_subscribed()
            mosquitto_pub(host, port, *run_args(version, 1), "-t", "done/t", "-m", "bye")
            normal.expect_message()
            assert normal.wait_exit() == 0  # after -C 1: DISCONNECT, then exit
        # The broker handled that DISCONNECT before this later publish.
        mosquitto_pub(host, port, *run_args(version, 1), "-t", "will/sentinel", "-m", "sentinel")
        assert watcher.expect_message().topic == "will/sentinel"


@VERSIONS
def test_persistent_session_of_mosquitto_sub(
    address: tuple[str, int], gw: RunningGateway, version: str
) -> None:
    # -c: clean session 0 (MQTT 5: session expiry "never" unless -x); QoS 1 messages
    # published while it is away are delivered when it comes back.
    host, port = address
    with MosquittoSub(
        host, port, *run_args(version, 1), "-c", "-t", "p/t", client_id="persist"
    ) as first:
        first.wait_subscribed()
    assert gw.call(lambda: gw.broker.sessions.get("persist") is not None)
    for i in range(3):
        mosquitto_pub(host, port, *run_args(version, 1), "-t", "p/t", "-m", f"queued {i}")
    with MosquittoSub(
        host, port, *run_args(version, 1), "-c", "-t", "p/t", "-C", "3", client_id="persist"
    ) as again:
        assert [m.payload for m in again.expect_messages(3)] == ["queued 0", "queued 1", "queued 2"]
        assert again.wait_exit() == 0


def test_mqtt5_properties_from_mosquitto_pub(address: tuple[str, int]) -> None:
    host, port = address
    with MosquittoSub(host, port, *run_args("mqttv5", 1), "-t", "p5/t", "-C", "1") as sub:
        sub.wait_subscribed()
        mosquitto_pub(
            host,
            port,
            *run_args("mqttv5", 1),
            "-t",
            "p5/t",
            "-m",
            "{}",
            "-D",
            "PUBLISH",
            "content-type",
            "application/json",
            "-D",
            "PUBLISH",
            "user-property",
            "k1",
            "v1",
            "-D",
            "PUBLISH",
            "user-property",
            "k2",
            "v2",
            "-D",
            "PUBLISH",
            "response-topic",
            "p5/reply",
        )
        message = sub.expect_message()
        assert message.content_type == "application/json"
        assert message.user_properties == "k1:v1 k2:v2"
        assert message.response_topic == "p5/reply"
        assert message.payload == "{}"


def test_mosquitto_sub_wildcards_and_dollar_topics(address: tuple[str, int]) -> None:
    host, port = address
    with MosquittoSub(
        host, port, *run_args("mqttv311", 1), "-t", "#", "-t", "$app/+", "-C", "3"
    ) as sub:
        sub.wait_subscribed()
        mosquitto_pub(host, port, "-q", "1", "-t", "$app/x", "-m", "dollar")
        mosquitto_pub(host, port, "-q", "1", "-t", "a/b/c", "-m", "deep")
        mosquitto_pub(host, port, "-q", "1", "-t", "$other/x", "-m", "not matched")
        mosquitto_pub(host, port, "-q", "1", "-t", "z", "-m", "last")
        assert [m.payload for m in sub.expect_messages(3)] == ["dollar", "deep", "last"]
