"""``${ENV}`` interpolation through the loader: values, types, defaults, errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config, parse_config

TEXT = textwrap.dedent(
    """\
    node_name: "edgebus@${SITE}"
    listeners:
      - type: tls
        bind: "${BIND_HOST:-0.0.0.0}:${TLS_PORT:-8883}"
        allow_anonymous: ${ANONYMOUS:-false}
        tls:
          certfile: ${TLS_DIR}/server.crt
          keyfile: ${TLS_DIR}/server.key
          keyfile_password: ${TLS_KEY_PASSWORD:-}
    mqtt:
      max_qos: ${MAX_QOS:-2}
      max_packet_size: ${MAX_PACKET:-1MB}
      publish_rate: ${RATE:-10}
    auth:
      http:
        url: https://auth.example/mqtt
        headers:
          Authorization: "Bearer ${TOKEN}"
    """
)

ENV = {"SITE": "plant-7", "TLS_DIR": "/etc/tls", "TOKEN": "abc"}


def test_values_and_defaults() -> None:
    config = parse_config(TEXT, "edgebus.yaml", env=ENV)
    listener = config.listeners[0]
    assert config.node_name == "edgebus@plant-7"
    assert (listener.bind.host, listener.bind.port) == ("0.0.0.0", 8883)
    assert listener.allow_anonymous is False
    assert listener.tls is not None
    assert listener.tls.certfile == Path("/etc/tls/server.crt")
    assert listener.tls.keyfile_password is None
    assert (config.mqtt.max_qos, config.mqtt.max_packet_size) == (2, 1_000_000)
    assert config.mqtt.publish_rate == 10.0
    assert config.auth.http is not None
    assert config.auth.http.headers == {"Authorization": "Bearer abc"}


def test_substituted_text_takes_the_keys_type() -> None:
    env = {
        **ENV,
        "TLS_PORT": "9883",
        "ANONYMOUS": "true",
        "MAX_QOS": "1",
        "MAX_PACKET": "64KiB",
        "RATE": "0.5",
        "TLS_KEY_PASSWORD": "123456",
    }
    config = parse_config(TEXT, "edgebus.yaml", env=env)
    listener = config.listeners[0]
    assert listener.bind.port == 9883
    assert listener.allow_anonymous is True
    assert config.mqtt.max_qos == 1
    assert config.mqtt.max_packet_size == 65536
    assert config.mqtt.publish_rate == 0.5
    assert config.mqtt.publish_burst == 1
    assert listener.tls is not None
    assert listener.tls.keyfile_password is not None
    assert listener.tls.keyfile_password.get_secret_value() == "123456"


def test_an_empty_variable_falls_back_to_the_default() -> None:
    config = parse_config(TEXT, "edgebus.yaml", env={**ENV, "MAX_QOS": ""})
    assert config.mqtt.max_qos == 2


def test_every_unset_variable_is_reported_with_its_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(TEXT, "edgebus.yaml", env={})
    assert caught.value.problems == [
        "edgebus.yaml:1 node_name: environment variable SITE is not set"
        " (write ${SITE:-default} to give a default)",
        "edgebus.yaml:7 listeners[0].tls.certfile: environment variable TLS_DIR is not set"
        " (write ${TLS_DIR:-default} to give a default)",
        "edgebus.yaml:8 listeners[0].tls.keyfile: environment variable TLS_DIR is not set"
        " (write ${TLS_DIR:-default} to give a default)",
        "edgebus.yaml:18 auth.http.headers.Authorization: environment variable TOKEN is not"
        " set (write ${TOKEN:-default} to give a default)",
    ]


def test_an_unset_variable_is_not_reported_twice() -> None:
    # url would also fail validation once "${URL}" became "": only the variable is reported
    text = "auth:\n  http:\n    url: ${URL}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "edgebus.yaml", env={})
    assert caught.value.problems == [
        "edgebus.yaml:3 auth.http.url: environment variable URL is not set"
        " (write ${URL:-default} to give a default)"
    ]


def test_a_bad_substituted_value_is_reported_like_a_written_one() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(TEXT, "edgebus.yaml", env={**ENV, "MAX_QOS": "5", "TLS_PORT": "x"})
    assert caught.value.problems == [
        "edgebus.yaml:4 listeners[0].bind: expected a port from 0 to 65535, got '0.0.0.0:x'",
        "edgebus.yaml:11 mqtt.max_qos: expected 0, 1 or 2, got 5",
    ]


def test_load_config_reads_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "edgebus.yaml"
    path.write_text("node_name: ${EDGEBUS_TEST_NODE}\n", encoding="utf-8")
    monkeypatch.setenv("EDGEBUS_TEST_NODE", "from-env")
    assert load_config(path).node_name == "from-env"
    assert load_config(path, env={"EDGEBUS_TEST_NODE": "explicit"}).node_name == "explicit"
