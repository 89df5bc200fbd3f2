"""Broken files and the exact lines a user reads: file, line, YAML path, message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config, parse_config
from gateway.config.errors import expected_choices, format_path


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(text), "edgebus.yaml", env={} if env is None else env)
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


TLS = """\
    tls:
      certfile: server.crt
      keyfile: server.key
"""

BROKEN = [
    pytest.param(
        """\
        listeners:
          - type: tpc
            bind: "127.0.0.1:1883"
        """,
        ["edgebus.yaml:2 listeners[0].type: expected one of tcp, tls, ws, wss, got 'tpc'"],
        id="literal",
    ),
    pytest.param(
        """\
        listeners:
          - type: tcp
            bind: "127.0.0.1:1883"
            alow_anonymous: false
        """,
        [
            "edgebus.yaml:4 listeners[0]: unknown key 'alow_anonymous';"
            " did you mean 'allow_anonymous'?"
        ],
        id="unknown-key-suggestion",
    ),
    pytest.param(
        "persistance: memory\n",
        ["edgebus.yaml:1: unknown key 'persistance'; did you mean 'persistence'?"],
        id="unknown-top-level-key",
    ),
    pytest.param(
        "mqtt:\n  frobnicate: 1\n",
        ["edgebus.yaml:2 mqtt: unknown key 'frobnicate'"],
        id="unknown-key-no-suggestion",
    ),
    pytest.param(
        """\
        listeners:
          - type: tcp
            allow_anonymous: false
        """,
        ["edgebus.yaml:2 listeners[0]: missing required key 'bind'"],
        id="missing-key-at-parent-line",
    ),
    pytest.param(
        """\
        listeners:
          - type: tcp
            bind: "127.0.0.1:1883"
            max_connections: abc
        """,
        ["edgebus.yaml:4 listeners[0].max_connections: expected an integer, got 'abc'"],
        id="int-parsing",
    ),
    pytest.param(
        "mqtt:\n  max_qos: 3\n",
        ["edgebus.yaml:2 mqtt.max_qos: expected 0, 1 or 2, got 3"],
        id="int-literal",
    ),
    pytest.param(
        "mqtt:\n  max_qos: true\n",
        ["edgebus.yaml:2 mqtt.max_qos: expected 0, 1 or 2, got true"],
        id="bool-is-not-qos",
    ),
    pytest.param(
        "mqtt:\n  max_inflight: yes\n",
        ["edgebus.yaml:2 mqtt.max_inflight: expected an integer, got true"],
        id="bool-is-not-int",
    ),
    pytest.param(
        "mqtt:\n  max_inflight: 2.5\n",
        ["edgebus.yaml:2 mqtt.max_inflight: expected an integer, got 2.5"],
        id="float-is-not-int",
    ),
    pytest.param(
        "mqtt:\n  publish_rate: fast\n",
        ["edgebus.yaml:2 mqtt.publish_rate: expected a number, got 'fast'"],
        id="float-parsing",
    ),
    pytest.param(
        "mqtt:\n  publish_rate: 0\n",
        ["edgebus.yaml:2 mqtt.publish_rate: expected more than 0, got 0"],
        id="gt",
    ),
    pytest.param(
        "mqtt:\n  receive_maximum: 0\n",
        ["edgebus.yaml:2 mqtt.receive_maximum: expected at least 1, got 0"],
        id="ge",
    ),
    pytest.param(
        "mqtt:\n  max_topic_alias: 70000\n",
        ["edgebus.yaml:2 mqtt.max_topic_alias: expected at most 65535, got 70000"],
        id="le",
    ),
    pytest.param(
        "mqtt:\n  retain_available: maybe\n",
        ["edgebus.yaml:2 mqtt.retain_available: expected true or false, got 'maybe'"],
        id="bool-parsing",
    ),
    pytest.param(
        "node_name: 42\n",
        ["edgebus.yaml:1 node_name: expected a string, got 42"],
        id="string-type",
    ),
    pytest.param(
        'node_name: ""\n',
        ["edgebus.yaml:1 node_name: must not be empty"],
        id="empty-string",
    ),
    pytest.param(
        "node_name: site/1\n",
        ["edgebus.yaml:1 node_name: must not contain '/' (it is part of $SYS topics)"],
        id="node-name-in-topics",
    ),
    pytest.param(
        "mqtt: 5\n",
        ["edgebus.yaml:1 mqtt: expected a mapping, got 5"],
        id="section-not-a-mapping",
    ),
    pytest.param(
        "listeners:\n  type: tcp\n",
        ["edgebus.yaml:1 listeners: expected a list, got a mapping"],
        id="list-expected",
    ),
    pytest.param(
        "- 1\n",
        ["edgebus.yaml:1: expected a mapping, got a list"],
        id="top-level-not-a-mapping",
    ),
    pytest.param(
        "sys:\n  interval: soon\n",
        [
            "edgebus.yaml:2 sys.interval: expected a duration like 500ms, 30s, 5m, 1h or 7d,"
            " got 'soon'"
        ],
        id="duration",
    ),
    pytest.param(
        "mqtt:\n  max_keepalive: 20h\n",
        ["edgebus.yaml:2 mqtt.max_keepalive: expected a duration from 1s to 65535s, got '20h'"],
        id="duration-bounds",
    ),
    pytest.param(
        "mqtt:\n  server_keep_alive: 1500ms\n",
        ["edgebus.yaml:2 mqtt.server_keep_alive: expected a whole number of seconds, got '1500ms'"],
        id="duration-whole-seconds",
    ),
    pytest.param(
        "auth:\n  http:\n    url: https://a.example\n    timeout: 0s\n",
        ["edgebus.yaml:4 auth.http.timeout: expected a duration longer than 0s, got '0s'"],
        id="duration-gt",
    ),
    pytest.param(
        "mqtt:\n  max_packet_size: 1GB\n",
        [
            "edgebus.yaml:2 mqtt.max_packet_size: expected a size from 1 byte to"
            " 268435455 bytes, got '1GB'"
        ],
        id="size-bounds",
    ),
    pytest.param(
        "mqtt:\n  max_queued_bytes: 0\n",
        ["edgebus.yaml:2 mqtt.max_queued_bytes: expected a size of at least 1 byte, got 0"],
        id="size-minimum",
    ),
    pytest.param(
        "mqtt:\n  write_high_water: lots\n",
        [
            "edgebus.yaml:2 mqtt.write_high_water: expected a size like 512KB, 64MB or 1GiB,"
            " got 'lots'"
        ],
        id="size",
    ),
    pytest.param(
        "listeners:\n  - type: tcp\n    bind: 1883\n",
        [
            "edgebus.yaml:3 listeners[0].bind: expected 'host:port' like 127.0.0.1:1883"
            " or [::1]:1883, got 1883"
        ],
        id="bind-int",
    ),
    pytest.param(
        "listeners:\n  - type: tcp\n    bind: 127.0.0.1:99999\n",
        [
            "edgebus.yaml:3 listeners[0].bind: expected a port from 0 to 65535,"
            " got '127.0.0.1:99999'"
        ],
        id="bind-port",
    ),
    pytest.param(
        "listeners:\n  - type: tcp\n    bind: '::1:1883'\n",
        [
            "edgebus.yaml:3 listeners[0].bind: expected an IPv6 address in brackets like"
            " [::1]:1883, got '::1:1883'"
        ],
        id="bind-v6-without-brackets",
    ),
    pytest.param(
        "listeners:\n  - type: tcp\n    bind: '[fe80::zz]:1883'\n",
        [
            "edgebus.yaml:3 listeners[0].bind: expected an IPv6 address in brackets,"
            " got '[fe80::zz]:1883'"
        ],
        id="bind-bad-v6",
    ),
    pytest.param(
        "listeners:\n  - type: tcp\n    bind: 'my host:1883'\n",
        [
            "edgebus.yaml:3 listeners[0].bind: expected a host name or IP address,"
            " got 'my host:1883'"
        ],
        id="bind-bad-host",
    ),
    pytest.param(
        "listeners:\n  - type: tls\n    bind: 0.0.0.0:8883\n",
        ["edgebus.yaml:2 listeners[0]: missing required key 'tls' (a tls listener needs one)"],
        id="tls-required",
    ),
    pytest.param(
        "listeners:\n  - type: tcp\n    bind: 0.0.0.0:1883\n" + TLS,
        ["edgebus.yaml:4 listeners[0].tls: not allowed on a tcp listener (did you mean type tls?)"],
        id="tls-forbidden-tcp",
    ),
    pytest.param(
        "listeners:\n  - type: ws\n    bind: 0.0.0.0:8083\n" + TLS,
        ["edgebus.yaml:4 listeners[0].tls: not allowed on a ws listener (did you mean type wss?)"],
        id="tls-forbidden-ws",
    ),
    pytest.param(
        "listeners:\n  - type: tls\n    bind: 0.0.0.0:1883\n    path: /mqtt\n" + TLS,
        ["edgebus.yaml:4 listeners[0].path: only allowed on ws and wss listeners, not tls"],
        id="path-forbidden",
    ),
    pytest.param(
        "listeners:\n  - type: ws\n    bind: 0.0.0.0:1883\n    path: mqtt\n",
        ["edgebus.yaml:4 listeners[0].path: expected a path starting with '/', got 'mqtt'"],
        id="path-slash",
    ),
    pytest.param(
        "listeners:\n  - type: tls\n    bind: 0.0.0.0:8883\n    tls:\n      certfile: a.crt\n",
        ["edgebus.yaml:4 listeners[0].tls: missing required key 'keyfile'"],
        id="tls-keyfile",
    ),
    pytest.param(
        "listeners:\n  - type: tls\n    bind: 0.0.0.0:8883\n" + TLS + "      min_version: 1.1\n",
        ["edgebus.yaml:7 listeners[0].tls.min_version: expected one of 1.2, 1.3, got 1.1"],
        id="tls-version",
    ),
    pytest.param(
        "listeners:\n  - type: tls\n    bind: 0.0.0.0:8883\n"
        + TLS
        + "      fail_if_no_peer_cert: true\n      verify_peer: true\n"
        "      use_identity_as_username: true\n",
        [
            "edgebus.yaml:8 listeners[0].tls.verify_peer: needs 'cafile' to verify client"
            " certificates"
        ],
        id="tls-verify-needs-cafile",
    ),
    pytest.param(
        "listeners:\n  - type: tls\n    bind: 0.0.0.0:8883\n"
        + TLS
        + "      fail_if_no_peer_cert: true\n      use_identity_as_username: true\n",
        [
            "edgebus.yaml:7 listeners[0].tls.fail_if_no_peer_cert: only works with"
            " 'verify_peer: true'",
            "edgebus.yaml:8 listeners[0].tls.use_identity_as_username: only works with"
            " 'verify_peer: true'",
        ],
        id="tls-options-need-verify-peer",
    ),
    pytest.param(
        """\
        listeners:
          - type: tcp
            bind: 127.0.0.1:1883
          - type: ws
            bind: 127.0.0.1:1883
            name: tcp:127.0.0.1:1883
        """,
        [
            "edgebus.yaml:5 listeners[1].bind: address 127.0.0.1:1883 is already used by"
            " listeners[0]",
            "edgebus.yaml:6 listeners[1].name: duplicate name 'tcp:127.0.0.1:1883'"
            " (also listeners[0])",
        ],
        id="listeners-distinct",
    ),
    pytest.param(
        "mqtt:\n  publish_burst: 10\n",
        ["edgebus.yaml:2 mqtt.publish_burst: only works together with 'publish_rate'"],
        id="burst-needs-rate",
    ),
    pytest.param(
        "auth:\n  http:\n    method: GET\n",
        ["edgebus.yaml:2 auth.http: missing required key 'url'"],
        id="http-url-required",
    ),
    pytest.param(
        "auth:\n  http:\n    url: ftp://files.example\n",
        [
            "edgebus.yaml:3 auth.http.url: expected an http:// or https:// URL, got 'ftp://files.example'"
        ],
        id="http-url-scheme",
    ),
    pytest.param(
        "auth:\n  http:\n    url: https://a.example\n    headers:\n      X-Retry: 3\n",
        ["edgebus.yaml:5 auth.http.headers.X-Retry: expected a string, got 3"],
        id="header-value",
    ),
    pytest.param(
        "auth:\n  http:\n    url: https://a.example\n    headers:\n      a.b: x\n"
        "      X Retry: [1]\n",
        ["edgebus.yaml:6 auth.http.headers['X Retry']: expected a string, got a list"],
        id="header-odd-keys",
    ),
    pytest.param(
        "acl:\n  rules:\n    - permission: allow\n      topics: []\n",
        ["edgebus.yaml:4 acl.rules[0].topics: must not be empty"],
        id="acl-topics-empty",
    ),
    pytest.param(
        "acl:\n  rules:\n    - topics: ['#']\n",
        ["edgebus.yaml:3 acl.rules[0]: missing required key 'permission'"],
        id="acl-permission",
    ),
    pytest.param(
        """\
        acl:
          rules:
            - permission: deny
              topics:
                - a/#/b
                - sensors/temp+
                - eq sensors/#
                - "clients/%c/#"
                - ""
        """,
        [
            "edgebus.yaml:5 acl.rules[0].topics[0]: '#' must be a whole level and the last"
            " one, got 'a/#/b'",
            "edgebus.yaml:6 acl.rules[0].topics[1]: '+' must be a whole level, got 'sensors/temp+'",
            "edgebus.yaml:9 acl.rules[0].topics[4]: a topic filter must not be empty, got ''",
        ],
        id="acl-topic-filters",
    ),
    pytest.param(
        "acl:\n  rules:\n    - permission: deny\n      ipaddress: 10.0.0.1/8\n"
        "      topics: ['#']\n",
        [
            "edgebus.yaml:4 acl.rules[0].ipaddress: expected a network address,"
            " got '10.0.0.1/8' (host bits set; did you mean '10.0.0.0/8'?)"
        ],
        id="acl-ip-host-bits",
    ),
    pytest.param(
        "acl:\n  rules:\n    - permission: deny\n      ipaddress: 10.0.0.300\n"
        "      topics: ['#']\n",
        [
            "edgebus.yaml:4 acl.rules[0].ipaddress: expected a network like 10.0.0.0/8 or"
            " an address, got '10.0.0.300'"
        ],
        id="acl-ip",
    ),
    pytest.param(
        "acl:\n  default: maybe\n  deny_action: kick\n",
        [
            "edgebus.yaml:2 acl.default: expected one of allow, deny, got 'maybe'",
            "edgebus.yaml:3 acl.deny_action: expected one of ignore, disconnect, got 'kick'",
        ],
        id="acl-choices",
    ),
    pytest.param(
        "logging:\n  level: LOUD\n",
        ["edgebus.yaml:2 logging.level: expected one of debug, info, warning, error, got 'LOUD'"],
        id="logging-level",
    ),
    pytest.param(
        "data_dir: ''\n",
        ["edgebus.yaml:1 data_dir: expected a file system path, got ''"],
        id="empty-path",
    ),
    pytest.param(
        "mqtt:\n  max_qos: 1\n  max_qos: 2\n",
        ["edgebus.yaml:3 mqtt.max_qos: duplicate key (first given on line 2)"],
        id="duplicate-key",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BROKEN)
def test_broken_file(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


def test_every_problem_is_reported_at_once_in_file_order() -> None:
    text = """\
        node_name: "a/b"
        persistance: sqlite
        listeners:
          - type: tpc
            bind: "127.0.0.1:1883"
          - type: tcp
            bind: "127.0.0.1:99999"
            alow_anonymous: false
          - type: ws
            path: mqtt
        mqtt:
          max_qos: 3
          max_inflight: true
          queue_overflow: drop
        auth:
          password_file: ${PASSWORD_FILE}
        acl:
          rules:
            - action: pub
              topics: ["a/#/b"]
        sys:
          interval: -1s
        logging:
          format: xml
        """
    assert problems(text) == [
        "edgebus.yaml:1 node_name: must not contain '/' (it is part of $SYS topics)",
        "edgebus.yaml:2: unknown key 'persistance'; did you mean 'persistence'?",
        "edgebus.yaml:4 listeners[0].type: expected one of tcp, tls, ws, wss, got 'tpc'",
        "edgebus.yaml:7 listeners[1].bind: expected a port from 0 to 65535, got '127.0.0.1:99999'",
        "edgebus.yaml:8 listeners[1]: unknown key 'alow_anonymous'; did you mean"
        " 'allow_anonymous'?",
        "edgebus.yaml:9 listeners[2]: missing required key 'bind'",
        "edgebus.yaml:10 listeners[2].path: expected a path starting with '/', got 'mqtt'",
        "edgebus.yaml:12 mqtt.max_qos: expected 0, 1 or 2, got 3",
        "edgebus.yaml:13 mqtt.max_inflight: expected an integer, got true",
        "edgebus.yaml:14 mqtt.queue_overflow: expected one of drop_oldest, drop_new, got 'drop'",
        "edgebus.yaml:16 auth.password_file: environment variable PASSWORD_FILE is not set"
        " (write ${PASSWORD_FILE:-default} to give a default)",
        "edgebus.yaml:19 acl.rules[0]: missing required key 'permission'",
        "edgebus.yaml:19 acl.rules[0].action: expected one of publish, subscribe, all, got 'pub'",
        "edgebus.yaml:20 acl.rules[0].topics[0]: '#' must be a whole level and the last one,"
        " got 'a/#/b'",
        "edgebus.yaml:22 sys.interval: expected a duration >= 0, got '-1s'",
        "edgebus.yaml:24 logging.format: expected one of text, json, got 'xml'",
    ]


def test_yaml_problems_and_schema_problems_come_together() -> None:
    text = """\
        mqtt:
          max_qos: 1
          max_qos: 5
        sys:
          interval: ${INTERVAL}
          events: sometimes
        """
    assert problems(text) == [
        "edgebus.yaml:3 mqtt.max_qos: duplicate key (first given on line 2)",
        "edgebus.yaml:3 mqtt.max_qos: expected 0, 1 or 2, got 5",
        "edgebus.yaml:5 sys.interval: environment variable INTERVAL is not set"
        " (write ${INTERVAL:-default} to give a default)",
        "edgebus.yaml:6 sys.events: expected true or false, got 'sometimes'",
    ]


def test_the_file_name_is_the_path_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "gw.yaml").write_text("mqtt:\n  max_qos: 7\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for given in ("conf/gw.yaml", Path("conf/gw.yaml"), "./conf/gw.yaml"):
        with pytest.raises(ConfigError) as caught:
            load_config(given)
        assert caught.value.problems == [f"{given}:2 mqtt.max_qos: expected 0, 1 or 2, got 7"]


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(missing)
    assert caught.value.problems == [
        f"{missing}: cannot read the configuration file: No such file or directory"
    ]
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"node_name: \xff\n")
    with pytest.raises(ConfigError) as caught:
        load_config(binary)
    assert caught.value.problems == [f"{binary}: not UTF-8 text (invalid byte at offset 11)"]


def test_a_byte_order_mark_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeffnode_name: bom\n".encode())
    assert load_config(path).node_name == "bom"


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("bridges", 0, "forwards", 2, "qos"), "bridges[0].forwards[2].qos"),
        (("node_name",), "node_name"),
        ((), ""),
        (("auth", "http", "headers", "X-Token"), "auth.http.headers.X-Token"),
        (("headers", "a.b"), "headers['a.b']"),
    ],
)
def test_format_path(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text


def test_expected_choices() -> None:
    assert expected_choices([0, 1, 2]) == "0, 1 or 2"
    assert expected_choices(["tcp", "tls", "ws", "wss"]) == "one of tcp, tls, ws, wss"
