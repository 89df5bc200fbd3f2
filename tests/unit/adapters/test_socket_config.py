"""Configuration of the ``zmq`` and ``nng`` adapters: keys, defaults and errors, each
error with file, line and YAML path."""

from __future__ import annotations

import textwrap

import pytest

from adapters.nanomsg.config import NngAdapterConfig
from adapters.zmq.config import ZmqAdapterConfig
from gateway.config import ConfigError, parse_config


def load(text: str) -> object:
    return parse_config(textwrap.dedent(text), "edgebus.yaml", env={})


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(text)
    return list(caught.value.problems)


def test_the_issue_keys_load_with_their_defaults() -> None:
    config = load(
        """\
        adapters:
          - type: zmq
            name: floor
            zmq_to_mqtt:
              - {socket: sub, connect: "tcp://127.0.0.1:5556", subscribe: [a/, b/],
                 frames: multipart, to_mqtt: "f/{zmq.topic}", qos: 1}
              - {socket: rep, bind: "ipc:///tmp/x.sock", to_mqtt: svc/x}
            mqtt_to_zmq:
              - {from_mqtt: "cmd/#", socket: pub, bind: "tcp://127.0.0.1:5557",
                 frames: prefix, delimiter: " ", topic: "{mqtt.topic}"}
              - {from_mqtt: svc/y, socket: dealer, connect: ["ipc:///a", "ipc:///b"]}
          - type: nng
            name: cell
            nng_to_mqtt:
              - {socket: sub0, connect: "ws://127.0.0.1:9000/x", to_mqtt: "n/{nng.topic}"}
            mqtt_to_nng:
              - {from_mqtt: "out/#", socket: req0, bind: "tcp://127.0.0.1:5600"}
        """
    )
    zmq, nng = config.adapters  # type: ignore[attr-defined]
    assert isinstance(zmq, ZmqAdapterConfig)
    assert isinstance(nng, NngAdapterConfig)
    sub, rep = zmq.zmq_to_mqtt
    assert sub.subscribe == ("a/", "b/")
    assert sub.high_water_mark == 100_000  # ZeroMQ's own 1000 drops too soon
    assert rep.frames == "raw"  # request/response sockets default to bare payloads
    assert zmq.mqtt_to_zmq[1].frames == "raw"
    assert zmq.mqtt_to_zmq[1].urls() == (("ipc:///a", "ipc:///b"), ())
    assert nng.nng_to_mqtt[0].frames == "prefix"  # NanoMQ's format
    assert nng.nng_to_mqtt[0].delimiter == "/"
    assert nng.nng_to_mqtt[0].high_water_mark == 8192
    assert nng.mqtt_to_nng[0].frames == "raw"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            '{socket: pull, to_mqtt: "x/{zmq.topic}"}',
            "edgebus.yaml:5 adapters[0].zmq_to_mqtt[0]: give exactly one of connect or bind",
        ),
        (
            '{socket: pull, connect: "udp://x:1", to_mqtt: x}',
            "adapters[0].zmq_to_mqtt[0].connect: expected a URL starting with ipc://, tcp://,"
            " got 'udp://x:1'",
        ),
        (
            '{socket: pull, bind: "tcp://127.0.0.1:1", subscribe: [a], to_mqtt: x}',
            "adapters[0].zmq_to_mqtt[0].subscribe: a pull socket does not subscribe",
        ),
        (
            '{socket: pull, bind: "tcp://127.0.0.1:1", frames: raw, to_mqtt: "x/{zmq.topic}"}',
            "adapters[0].zmq_to_mqtt[0].to_mqtt: the raw layout carries no topic: {zmq.topic}",
        ),
        (
            '{socket: pull, bind: "tcp://127.0.0.1:1", frames: prefix, to_mqtt: x}',
            "adapters[0].zmq_to_mqtt[0].delimiter: the prefix layout needs a delimiter",
        ),
        (
            '{socket: pull, bind: "tcp://127.0.0.1:1", delimiter: ":", to_mqtt: x}',
            "adapters[0].zmq_to_mqtt[0].delimiter: only the prefix frame layout has a delimiter",
        ),
        (
            '{socket: sub, bind: "tcp://127.0.0.1:1", response_topic: r, to_mqtt: x}',
            "adapters[0].zmq_to_mqtt[0].response_topic: a sub socket sends no requests",
        ),
        (
            '{socket: push, bind: "tcp://127.0.0.1:1", to_mqtt: x}',
            "adapters[0].zmq_to_mqtt[0].socket: expected one of sub, pull, rep, router, got 'push'",
        ),
        (
            '{socket: pull, bind: "tcp://127.0.0.1:1", to_mqtt: "a/#"}',
            "adapters[0].zmq_to_mqtt[0].to_mqtt",
        ),
    ],
)
def test_inbound_mistakes_are_reported_where_they_are(entry: str, expected: str) -> None:
    found = problems(
        f"""\
        adapters:
          - type: zmq
            name: floor
            zmq_to_mqtt:
              - {entry}
        """
    )
    assert any(expected in p for p in found), found


def test_outbound_mistakes() -> None:
    found = problems(
        """\
        adapters:
          - type: zmq
            name: floor
            mqtt_to_zmq:
              - {from_mqtt: "a/#", socket: xpub, bind: "tcp://127.0.0.1:1", topic: "{a}"}
              - {from_mqtt: "a/#/b", socket: pub, bind: "tcp://127.0.0.1:1"}
              - {from_mqtt: "a/#", socket: sub, bind: "tcp://127.0.0.1:1"}
        """
    )
    assert any(
        "edgebus.yaml:5 adapters[0].mqtt_to_zmq[0].topic: an xpub socket needs a topic" in p
        for p in found
    ), found
    assert any("adapters[0].mqtt_to_zmq[1].from_mqtt" in p for p in found), found
    assert any("adapters[0].mqtt_to_zmq[2].socket" in p for p in found), found


def test_an_adapter_needs_mappings_with_distinct_names() -> None:
    assert any(
        "expected at least one entry in zmq_to_mqtt or mqtt_to_zmq" in p
        for p in problems("adapters:\n  - {type: zmq, name: empty}\n")
    )
    found = problems(
        """\
        adapters:
          - type: nng
            name: cell
            nng_to_mqtt:
              - {name: twin, socket: pull0, bind: "ipc:///a", to_mqtt: x}
            mqtt_to_nng:
              - {name: twin, from_mqtt: y, socket: push0, bind: "ipc:///b"}
        """
    )
    assert any("mapping names must be unique: twin" in p for p in found), found


def test_nng_buffers_are_bounded_by_nng() -> None:
    found = problems(
        """\
        adapters:
          - type: nng
            name: cell
            mqtt_to_nng:
              - {from_mqtt: y, socket: push0, bind: "ipc:///b", high_water_mark: 10000}
        """
    )
    assert any("adapters[0].mqtt_to_nng[0].high_water_mark" in p for p in found), found
