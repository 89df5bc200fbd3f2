"""Topic templates of ``zmq`` (and, through the shared socket config, ``nng``) mappings,
checked by ``edgebus check`` as ``run`` does: a field no message can fill is refused
there, instead of failing every message at run time with "field 'b' is not available
here"."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET
from tests.helpers.check_command import check as check_file


def check(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    """``edgebus check`` on ``text`` after a quiet listener section."""
    return check_file(tmp_path, QUIET + text)


def test_an_outbound_topic_field_the_filter_does_not_capture_is_refused(tmp_path: Path) -> None:
    code, lines = check(
        tmp_path,
        "adapters:\n"
        "  - type: zmq\n"
        "    name: z\n"
        "    mqtt_to_zmq:\n"
        '      - {socket: push, bind: "tcp://127.0.0.1:1", from_mqtt: "r/{a}", topic: "{a}"}\n'
        "      - socket: push\n"
        '        bind: "tcp://127.0.0.1:2"\n'
        '        from_mqtt: "r/{a}"\n'
        '        topic: "{b}/{payload.id}/{c}"\n',
    )
    assert code == 2
    assert lines == [
        "edgebus.yaml:11 adapters[0].mqtt_to_zmq[1].topic: {b}, {c} is not captured by the"
        " `from_mqtt` filter 'r/{a}'"
    ]


def test_an_inbound_field_other_than_the_native_topic_or_payload_is_refused(
    tmp_path: Path,
) -> None:
    code, lines = check(
        tmp_path,
        "adapters:\n"
        "  - type: zmq\n"
        "    name: z\n"
        "    zmq_to_mqtt:\n"
        '      - {socket: pull, bind: "tcp://127.0.0.1:1", to_mqtt: "in/{zmq.topic}/{b}"}\n'
        "  - type: nng\n"
        "    name: n\n"
        "    mqtt_to_nng:\n"
        '      - {socket: push0, connect: "tcp://127.0.0.1:3", from_mqtt: "x/+", topic: "{x}"}\n',
    )
    assert code == 2
    assert lines == [
        "edgebus.yaml:7 adapters[0].zmq_to_mqtt[0].to_mqtt: {b} is not available: expected"
        " {zmq.topic} or `payload.` fields",
        "edgebus.yaml:11 adapters[1].mqtt_to_nng[0].topic: {x} is not captured by the"
        " `from_mqtt` filter 'x/+'",
    ]


def test_captures_the_mqtt_topic_and_payload_fields_are_accepted(tmp_path: Path) -> None:
    code, lines = check(
        tmp_path,
        "adapters:\n"
        "  - type: zmq\n"
        "    name: z\n"
        "    zmq_to_mqtt:\n"
        '      - {socket: sub, connect: "tcp://127.0.0.1:1",\n'
        '         to_mqtt: "in/{zmq.topic}/{payload.id}"}\n'
        '      - {socket: pull, bind: "tcp://127.0.0.1:2", frames: raw, to_mqtt: "j/{key.k}"}\n'
        "    mqtt_to_zmq:\n"
        '      - {socket: pub, bind: "tcp://127.0.0.1:3", from_mqtt: "c/{r}/{rest#}",\n'
        '         topic: "{r}.{rest}.{payload.v}.{mqtt.topic}"}\n'
        '      - {socket: xpub, bind: "tcp://127.0.0.1:4", from_mqtt: "f/#",'
        ' topic: "p/{mqtt.topic}"}\n'
        '      - {socket: req, connect: "tcp://127.0.0.1:5", from_mqtt: "q/{s}", topic: "{s}"}\n'
        "  - type: nng\n"
        "    name: n\n"
        "    nng_to_mqtt:\n"
        '      - {socket: sub0, connect: "tcp://127.0.0.1:6", to_mqtt: "n/{nng.topic}"}\n',
    )
    assert (code, lines) == (0, ["edgebus.yaml: OK"])
