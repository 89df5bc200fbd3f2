"""The ``bridges[]`` section: profiles, AWS IoT Core's limits, templates, MQTT 5 keys."""

from __future__ import annotations

import pytest

from broker_core.errors import ConfigError
from gateway.config import parse_config

AWS = """
bridges:
  - name: aws
    type: aws_iot
    server: "example.iot.eu-west-1.amazonaws.com:443"
    aws: {region: eu-west-1, thing_name: gw-1}
    tls: {certfile: /c.pem, keyfile: /k.pem}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "e.yaml")
    return caught.value.problems


def test_aws_iot_profile_defaults_and_warnings() -> None:
    config = parse_config(
        AWS + '    forwards: [{local: "a/#", qos: 2}]\n    subscriptions: [{remote: "c/#"}]\n',
        "e.yaml",
    )
    bridge = config.bridges[0]
    assert (bridge.default_client_id("node"), bridge.alpn(), bridge.uses_tls()) == (
        "gw-1",
        ("x-amzn-mqtt-ca",),
        True,
    )
    assert bridge.warnings() == [
        (("forwards", 0, "qos"), "AWS IoT Core has no QoS 2: QoS 1 is used")
    ]
    assert bridge.max_qos() == 1


def test_aws_iot_limits_are_checked_before_anything_runs() -> None:
    deep = "/".join(["l"] * 9)
    problems = _problems(
        AWS
        + f'    forwards: [{{local: "a/{{x}}", remote: "{deep}/{{x}}"}}]\n'
        + '    subscriptions: [{remote: "$SYS/#"}]\n'
    )
    assert problems == [
        "e.yaml:8 bridges[0].forwards[0].remote: AWS IoT Core allows 7 '/' in a topic at most,"
        " got 9",
        "e.yaml:9 bridges[0].subscriptions[0].remote: AWS IoT Core reserves topics starting with"
        " '$' (except $aws/...)",
    ]


def test_emqx_cloud_needs_credentials_and_uses_tls() -> None:
    base = (
        "bridges:\n  - {name: e, type: emqx_cloud, server: \"x.emqxsl.com:8883\","
        ' forwards: [{local: "#"}]'
    )
    assert _problems(base + "}\n") == [
        "e.yaml:2 bridges[0].username: EMQX Cloud needs a username and password (or tls.certfile)"
    ]
    config = parse_config(base + ", username: u, password: p}\n", "e.yaml")
    assert config.bridges[0].uses_tls() and config.bridges[0].alpn() == ()


def test_templates_must_use_captured_names() -> None:
    problems = _problems(
        'bridges:\n  - name: b\n    server: "h:1"\n'
        '    forwards: [{local: "a/{x}", remote: "b/{y}"}]\n'
    )
    assert len(problems) == 1
    assert "{y} is not captured by the `local` filter 'a/{x}'" in problems[0]


def test_mqtt5_keys_need_mqtt5() -> None:
    text = (
        'bridges:\n  - name: b\n    server: "h:1"\n    protocol_version: "3.1.1"\n'
        '    forwards: [{local: "#"}]\n    connect_properties: {receive_maximum: 10}\n'
    )
    assert _problems(text) == [
        "e.yaml:6 bridges[0].connect_properties: MQTT 5 only (protocol_version: 5)"
    ]
    config = parse_config(text.replace('"3.1.1"', '"5"'), "e.yaml")
    assert config.bridges[0].connect_properties.receive_maximum == 10
