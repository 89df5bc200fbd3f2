"""Defaults, round trips (dump -> load gives the same model) and the models' rules."""

from __future__ import annotations

import textwrap
from ipaddress import ip_network
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from gateway.config import (
    AclConfig,
    AclRule,
    AuthConfig,
    BindAddress,
    GatewayConfig,
    HttpAuthConfig,
    ListenerConfig,
    LoggingConfig,
    MqttConfig,
    SysConfig,
    TlsConfig,
    dump_config,
    load_config,
    parse_config,
)


def parse(text: str) -> GatewayConfig:
    return parse_config(textwrap.dedent(text), "edgebus.yaml", env={})


def test_no_file_means_the_embedded_defaults() -> None:
    config = load_config(None)
    assert config == GatewayConfig()
    assert config == parse("")
    assert config == parse("# only a comment\n")
    assert config.node_name == "edgebus@127.0.0.1"
    assert config.data_dir == Path("edgebus-data")
    assert config.persistence == "sqlite"
    assert [(item.type, str(item.bind), item.name, item.path) for item in config.listeners] == [
        ("tcp", "127.0.0.1:1883", "tcp:127.0.0.1:1883", None),
        ("ws", "127.0.0.1:8083", "ws:127.0.0.1:8083", "/mqtt"),
    ]
    assert config.listeners[0].allow_anonymous is True
    assert config.listeners[0].max_connections == 10000
    assert config.listeners[0].max_pending_connections == 256
    assert config.listeners[0].connection_rate is None
    assert config.listeners[0].tls is None


def test_mqtt_defaults() -> None:
    assert MqttConfig().model_dump() == {
        "max_packet_size": 1_000_000,
        "server_keep_alive": None,
        "max_keepalive": 65535.0,
        "receive_maximum": 32,
        "max_inflight": 256,
        "max_queued_messages": 1000,
        "max_queued_bytes": 64_000_000,
        "max_queued_bytes_total": 256_000_000,
        "max_inflight_bytes": 16_000_000,
        "max_offline_sessions": 10_000,
        "max_will_bytes_total": 64_000_000,
        "queue_overflow": "drop_oldest",
        "max_session_expiry": 604800.0,
        "max_topic_alias": 10,
        "max_topic_alias_bytes": 32_000_000,
        "max_packet_properties": 128,
        "max_packet_properties_bytes": 131_072,
        "max_subscriptions": 1000,
        "max_subscriptions_total": 100_000,
        "max_topic_levels": 128,
        "read_budget": 65536,
        "max_qos": 2,
        "retain_available": True,
        "max_retained_messages": 100000,
        "max_retained_bytes": 64_000_000,
        "wildcard_subscriptions": True,
        "shared_subscriptions": True,
        "subscription_identifiers": True,
        "max_client_id_length": 65535,
        "publish_rate": None,
        "publish_burst": None,
        "write_high_water": 1_000_000,
        "write_timeout": 60.0,
        "max_delayed_messages": 100000,
        "max_delayed_bytes": 64_000_000,
    }


def test_other_section_defaults() -> None:
    assert AuthConfig().model_dump() == {
        "password_file": None,
        "http": None,
        "scram": True,
        "login_throttle": {
            "enabled": True,
            "free_failures": 5,
            "delay": 1.0,
            "max_delay": 60.0,
            "forget_after": 600.0,
            "max_tracked": 10000,
        },
    }
    assert AclConfig().model_dump() == {"default": "allow", "deny_action": "ignore", "rules": ()}
    assert SysConfig().model_dump() == {"interval": 10.0, "events": True}
    assert LoggingConfig().model_dump() == {
        "level": "info",
        "format": "text",
        "file": None,
        "max_size": 10_000_000,
        "backups": 5,
    }
    http = HttpAuthConfig.model_validate({"url": "https://auth.example"})
    assert (http.method, http.timeout, http.cache_ttl, http.headers) == ("POST", 5.0, 60.0, {})
    tls = TlsConfig.model_validate({"certfile": "a.crt", "keyfile": "a.key"})
    assert tls.model_dump() == {
        "certfile": Path("a.crt"),
        "keyfile": Path("a.key"),
        "cafile": None,
        "crlfile": None,
        "verify_peer": False,
        "fail_if_no_peer_cert": False,
        "use_identity_as_username": False,
        "min_version": "1.2",
        "ciphers": None,
        "keyfile_password": None,
    }
    rule = AclRule.model_validate({"permission": "deny", "topics": ["#"]})
    assert (rule.action, rule.username, rule.clientid, rule.ipaddress) == ("all", None, None, None)


def test_empty_sections_mean_defaults() -> None:
    config = parse(
        """\
        mqtt:
        auth:
        acl:
        sys:
        logging:
        """
    )
    assert config == GatewayConfig()


def test_listing_listeners_replaces_the_defaults() -> None:
    assert parse("listeners: []\n").listeners == ()
    config = parse("listeners:\n  - {type: tcp, bind: '0.0.0.0:0'}\n")
    assert [item.name for item in config.listeners] == ["tcp:0.0.0.0:0"]


def test_values_arrive_parsed() -> None:
    config = parse(
        """\
        data_dir: /var/lib/edgebus
        listeners:
          - type: ws
            bind: "[::1]:0"
            name: null
            path: null
        mqtt:
          max_packet_size: 256KiB
          max_keepalive: 15m
          max_session_expiry: 1d
          server_keep_alive: 60
          publish_rate: 2.5
        sys:
          interval: 500ms
        acl:
          rules:
            - permission: allow
              ipaddress: 192.168.1.7
              topics: ["eq #", "clients/%c/#", "+/status"]
        """
    )
    listener = config.listeners[0]
    assert listener.bind == BindAddress("::1", 0)
    assert (listener.bind.host, listener.bind.port) == ("::1", 0)
    assert (listener.name, listener.path) == ("ws:[::1]:0", "/mqtt")
    assert config.data_dir == Path("/var/lib/edgebus")
    assert config.mqtt.max_packet_size == 256 * 1024
    assert config.mqtt.max_keepalive == 900.0
    assert config.mqtt.max_session_expiry == 86400.0
    assert config.mqtt.server_keep_alive == 60.0
    assert config.mqtt.publish_burst == 3  # ceil(publish_rate)
    assert config.sys.interval == 0.5
    rule = config.acl.rules[0]
    assert rule.ipaddress == ip_network("192.168.1.7/32")
    assert rule.topics == ("eq #", "clients/%c/#", "+/status")


def test_yaml_conveniences() -> None:
    config = parse(
        """\
        listeners:
          - type: tls
            bind: "0.0.0.0:8883"
            tls: {certfile: a.crt, keyfile: a.key, min_version: 1.3}
        auth:
          http: {url: "http://127.0.0.1:8080/auth", method: get}
        logging:
          level: DEBUG
        mqtt:
          max_qos: "1"
        """
    )
    assert config.listeners[0].tls is not None
    assert config.listeners[0].tls.min_version == "1.3"
    assert config.auth.http is not None
    assert config.auth.http.method == "GET"
    assert config.logging.level == "debug"
    assert config.mqtt.max_qos == 1


def test_models_are_frozen() -> None:
    config = GatewayConfig()
    with pytest.raises(ValidationError):
        config.node_name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.mqtt.max_qos = 1  # type: ignore[misc]
    assert isinstance(config.listeners, tuple)


def test_keyfile_password_is_a_secret() -> None:
    tls = TlsConfig.model_validate({"certfile": "a", "keyfile": "b", "keyfile_password": "hunter2"})
    assert tls.keyfile_password == SecretStr("hunter2")
    assert "hunter2" not in repr(tls)
    assert "hunter2" not in tls.model_dump_json()
    empty = TlsConfig.model_validate({"certfile": "a", "keyfile": "b", "keyfile_password": ""})
    assert empty.keyfile_password is None


FULL = """\
node_name: plant-7
data_dir: /srv/edgebus
persistence: memory
listeners:
  - type: tcp
    bind: 0.0.0.0:1883
    allow_anonymous: false
    max_connections: 5
    connection_rate: 2.5
  - type: tls
    name: secure
    bind: "[::]:8883"
    tls:
      certfile: /etc/tls/server.crt
      keyfile: /etc/tls/server.key
      cafile: /etc/tls/ca.crt
      verify_peer: true
      fail_if_no_peer_cert: true
      use_identity_as_username: true
      min_version: "1.3"
      ciphers: ECDHE+AESGCM
      keyfile_password: s3cret
  - type: ws
    bind: 127.0.0.1:8083
    path: /ws
  - type: wss
    bind: 127.0.0.1:8084
    tls: {certfile: c.pem, keyfile: k.pem}
mqtt:
  max_packet_size: 64KiB
  server_keep_alive: 30s
  max_keepalive: 10m
  receive_maximum: 10
  max_inflight: 5
  max_queued_messages: 7
  max_queued_bytes: 1MiB
  queue_overflow: drop_new
  max_session_expiry: 1h
  max_topic_alias: 0
  max_qos: 1
  retain_available: false
  max_retained_messages: 0
  wildcard_subscriptions: false
  shared_subscriptions: false
  subscription_identifiers: false
  max_client_id_length: 23
  publish_rate: 0.25
  publish_burst: 9
  write_high_water: 1500
  max_delayed_messages: 0
auth:
  password_file: ./passwd
  http:
    url: https://auth.example/mqtt
    method: GET
    timeout: 1500ms
    cache_ttl: 0
    headers: {Authorization: Bearer x, X-Site: "7"}
  scram: false
acl:
  default: deny
  deny_action: disconnect
  rules:
    - permission: allow
      action: publish
      username: alice
      clientid: c1
      ipaddress: 10.0.0.0/8
      topics: ["a/+/b", "eq c/#"]
    - permission: deny
      ipaddress: "2001:db8::/32"
      topics: ["#"]
sys:
  interval: 0
  events: false
logging:
  level: warning
  format: json
"""


def test_a_file_setting_every_key_round_trips() -> None:
    config = parse(FULL)
    assert config.mqtt.publish_burst == 9
    assert config.listeners[1].tls is not None
    assert config.listeners[1].tls.keyfile_password == SecretStr("s3cret")
    text = dump_config(config)
    assert parse(text) == config
    assert dump_config(parse(text)) == text  # the dump is stable


@pytest.mark.parametrize(
    "section",
    ["node_name", "data_dir", "persistence", "listeners", "mqtt", "auth", "acl", "sys", "logging"],
)
def test_every_section_round_trips(section: str) -> None:
    full = parse(FULL)
    only = GatewayConfig.model_validate({section: getattr(full, section)})
    assert getattr(only, section) != getattr(GatewayConfig(), section)
    assert parse(dump_config(only)) == only


@pytest.mark.parametrize(
    "model",
    [
        ListenerConfig,
        TlsConfig,
        MqttConfig,
        AuthConfig,
        HttpAuthConfig,
        AclConfig,
        AclRule,
        SysConfig,
        LoggingConfig,
        GatewayConfig,
    ],
)
def test_every_model_is_strict_and_documented(model: type[BaseModel]) -> None:
    assert model.model_config.get("extra") == "forbid"
    assert model.model_config.get("frozen") is True
    for name, field in model.model_fields.items():
        assert field.description not in (None, ""), f"{model.__name__}.{name} has no description"
