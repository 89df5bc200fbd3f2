"""The ``nng`` adapter against Debian's ``nngcat`` (nng-utils), NNG's own C tool.

NanoMQ's NNG bridge wire format (``topic/payload``) both ways, push/pull, and
request/response both ways (``nngcat --rep0`` as a service, ``nngcat --req0`` asking
an MQTT responder through the adapter's ``rep0`` front).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers.gateway import running_gateway
from tests.helpers.peer_process import PeerProcess
from tests.helpers.timeouts import unit
from tests.integration.adapters.socket_support import (
    answer_upper_case,
    counters,
    ipc_dir,
    mqtt_client,
    tcp_url,
    wait_counter,
    wait_state,
)
from tests.integration.broker.support import publish_props

__all__ = ["ipc_dir"]  # the fixture, used by name

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        shutil.which("nngcat") is None, reason="nngcat is not installed (apt-get install nng-utils)"
    ),
]


def nngcat(*args: str, prints: bool = True) -> PeerProcess:
    """``nngcat`` with ``args``; with ``prints``, ``--quoted`` output, one message a line
    (nngcat refuses a format for a socket that cannot receive, such as ``--pub0``)."""
    line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
    quoted = ["--quoted"] if prints else []
    return PeerProcess([*line_buffered, "nngcat", *args, *quoted])


def quoted(peer: PeerProcess) -> str:
    """The next message nngcat printed (``--quoted``: a C string literal, JSON for ASCII)."""
    text: str = json.loads(peer.line(unit(10)))
    return text


def config(*entries: str) -> str:
    return "adapters:\n  - type: nng\n    name: cat\n" + "".join(entries)


def section(key: str, items: Sequence[str]) -> str:
    return f"    {key}:\n" + "".join(f"      - {item}\n" for item in items)


def test_nanomq_bridge_format_from_nngcat_to_mqtt(tmp_path: Path) -> None:
    url = tcp_url()
    entry = section(
        "nng_to_mqtt",
        [
            f"{{socket: sub0, connect: '{url}', subscribe: [remote/nng],"
            " to_mqtt: 'nc/{nng.topic}'}"
        ],
    )
    with (
        running_gateway(tmp_path, config(entry)) as gw,
        mqtt_client(gw, "watch") as watch,
    ):
        watch.subscribe("nc/#", 1)
        # NanoMQ's bridges.nng.pub sends remote_topic + "/" + payload on a pub0 socket.
        pub = nngcat(
            "--pub0", "--listen", url, "--data", "remote/nng/21.5", "--interval", "1", prints=False
        )
        with pub:
            message = watch.expect_message(unit(10))
        assert (message.topic, message.payload) == ("nc/remote/nng", b"21.5")
        assert counters(gw, "cat")["nng_to_mqtt[0].published"] >= 1


def test_mqtt_to_nngcat_subscriber_and_puller(tmp_path: Path) -> None:
    pub_url, push_url = tcp_url(), tcp_url()
    entry = section(
        "mqtt_to_nng",
        [
            f"{{from_mqtt: 'nc/pub/#', socket: pub0, bind: '{pub_url}'}}",
            f"{{from_mqtt: 'nc/push/#', socket: push0, connect: '{push_url}', frames: raw}}",
        ],
    )
    with (
        nngcat("--pull0", "--listen", push_url, "--count", "3") as pull,
        running_gateway(tmp_path, config(entry)) as gw,
        mqtt_client(gw, "source") as source,
    ):
        for i in range(3):
            source.publish(f"nc/push/{i}", b"raw-%d" % i, qos=1)
        assert [quoted(pull) for _ in range(3)] == ["raw-0", "raw-1", "raw-2"]

        with nngcat("--sub0", "--dial", pub_url, "--subscribe", "nc/", "--count", "1") as sub:
            wait_counter(gw, "cat", "mqtt_to_nng[0].connected", 1)
            # A subscriber that just connected may miss the first messages: send until one
            # arrives (NNG's pub0 drops for a subscriber not there yet).
            for _ in range(50):
                source.publish("nc/pub/temp", b"22", qos=1)
                try:
                    got = json.loads(sub.line(unit(0.2)))
                    break
                except AssertionError:
                    continue
            else:
                raise AssertionError("nngcat --sub0 received nothing")
        assert got == "nc/pub/temp/22"  # NanoMQ's format: topic/payload


def test_requests_both_ways_with_nngcat(tmp_path: Path, ipc_dir: Path) -> None:
    service, front = f"ipc://{ipc_dir}/svc", f"ipc://{ipc_dir}/front"
    entry = section(
        "mqtt_to_nng", [f"{{from_mqtt: svc/ping, socket: req0, connect: '{service}'}}"]
    ) + section(
        "nng_to_mqtt",
        [f"{{socket: rep0, bind: '{front}', to_mqtt: svc/shout, response_topic: re/shout}}"],
    )
    with (
        nngcat("--rep0", "--listen", service, "--data", "pong") as rep,
        running_gateway(tmp_path, config(entry)) as gw,
        mqtt_client(gw, "user") as user,
    ):
        wait_state(gw, "cat", "running")
        # An MQTT 5 request answered by nngcat --rep0.
        user.subscribe("re/user", 1)
        props = publish_props(ResponseTopic="re/user", CorrelationData=b"c-1")
        user.publish("svc/ping", b"ping", qos=1, properties=props)
        assert quoted(rep) == "ping"
        reply = user.expect_message(unit(10))
        assert (reply.topic, reply.payload) == ("re/user", b"pong")
        assert reply.properties.CorrelationData == b"c-1"

        # nngcat --req0 asks through the rep0 front; the MQTT responder answers.
        user.subscribe("svc/shout", 1)

        answer_upper_case(user, "svc/shout")
        # --interval: without it nngcat 1.5.2 fails now and then with "Cannot set recv
        # timeout: Invalid argument" (it derives the receive timeout from the interval).
        ask = ("--req0", "--dial", front, "--data", "hello", "--count", "1", "--interval", "1")
        with nngcat(*ask) as req:
            assert quoted(req) == "HELLO"
