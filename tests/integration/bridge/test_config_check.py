"""``edgebus check`` (and ``edgebus run``, which refuses the file with the same lines) on
bridge configurations, as a user runs them: a subprocess on a real file. Every problem
of a bridge is reported in one run, the checks between its keys (forwards or
subscriptions, the profiles' needs, MQTT 5 only properties, the TLS key pair and files)
included, even when another key of the same bridge has a problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.mosquitto.tools import run_edgebus

#: Two bridges, each with a key that has a problem of its own (keepalive, tls.verify)
#: and problems between keys that pydantic's "after" validators alone would report
#: only once that key is fixed.
SEVERAL = """\
data_dir: data
listeners: [{type: tcp, bind: "127.0.0.1:0"}]
api: {enabled: false}
bridges:
  - name: cloud
    type: aws_iot
    server: "example.com:8883"
    protocol_version: "3.1.1"
    keepalive: 0s
    aws: {region: eu-central-1, thing_name: t}
    connect_properties: {receive_maximum: 10}
    forwards: []
  - name: emqx
    type: emqx_cloud
    server: "example.com:0"
    aws: {region: eu-central-1}
    tls: {verify: maybe, keyfile: missing-key.pem}
    subscriptions: [{remote: "a/{x}", local: "b/{y}", qos: 3}]
"""

EXPECTED = [
    "edgebus.yaml:5 bridges[0].tls: AWS IoT Core needs mutual TLS: set tls.certfile and keyfile",
    "edgebus.yaml:9 bridges[0].keepalive: expected a duration from 1s to 65535s, got '0s'",
    "edgebus.yaml:11 bridges[0].connect_properties: MQTT 5 only (protocol_version: 5)",
    "edgebus.yaml:12 bridges[0].forwards: a bridge needs `forwards` or `subscriptions`",
    "edgebus.yaml:15 bridges[1].server: expected a port from 1 to 65535",
    "edgebus.yaml:16 bridges[1].aws: only for `type: aws_iot`",
    "edgebus.yaml:17 bridges[1].tls.verify: expected true or false, got 'maybe'",
    "edgebus.yaml:17 bridges[1].tls.certfile: certfile and keyfile go together",
    "edgebus.yaml:13 bridges[1].username: EMQX Cloud needs a username and password"
    " (or tls.certfile)",
    "edgebus.yaml:18 bridges[1].subscriptions[0].qos: expected 0, 1 or 2, got 3",
    "edgebus.yaml:18 bridges[1].subscriptions[0]: {y} is not captured by the `remote`"
    " filter 'a/{x}'",
]


@pytest.mark.parametrize("command", [("check", "edgebus.yaml"), ("run", "-c", "edgebus.yaml")])
def test_every_problem_of_a_bridge_in_one_run(tmp_path: Path, command: tuple[str, ...]) -> None:
    (tmp_path / "edgebus.yaml").write_text(SEVERAL)
    done = run_edgebus(tmp_path, *command)
    lines = [line.replace(f"{tmp_path}/", "") for line in done.stderr.strip().splitlines()]
    assert done.returncode == 2
    assert sorted(lines) == sorted(EXPECTED)


def test_the_tls_files_are_checked_when_another_tls_key_has_a_problem(tmp_path: Path) -> None:
    (tmp_path / "edgebus.yaml").write_text(
        "data_dir: data\n"
        'listeners: [{type: tcp, bind: "127.0.0.1:0"}]\n'
        "api: {enabled: false}\n"
        "bridges:\n"
        "  - name: b\n"
        '    server: "example.com:8883"\n'
        "    tls: {verify: maybe, cafile: no-such-ca.pem}\n"
        "    forwards: [{local: a/#}]\n"
    )
    done = run_edgebus(tmp_path, "check", "edgebus.yaml")
    lines = [line.replace(f"{tmp_path}/", "") for line in done.stderr.strip().splitlines()]
    assert done.returncode == 2
    assert lines[0] == "edgebus.yaml:7 bridges[0].tls.verify: expected true or false, got 'maybe'"
    assert lines[1].startswith("edgebus.yaml:7 bridges[0].tls.cafile: ")
    assert len(lines) == 2


def test_mqtt5_subscription_options_and_retain_on_a_311_bridge_are_warnings(
    tmp_path: Path,
) -> None:
    (tmp_path / "edgebus.yaml").write_text(
        """\
data_dir: data
listeners: [{type: tcp, bind: "127.0.0.1:0"}]
api: {enabled: false}
bridges:
  - name: cloud
    server: "127.0.0.1:1883"
    protocol_version: "3.1.1"
    subscriptions:
      - {remote: "a/#", retain: true}
      - {remote: "b/#", no_local: false, retain_as_published: true, retain_handling: 2}
      - {remote: "c/#"}
  - name: five
    server: "127.0.0.1:1883"
    protocol_version: "5"
    subscriptions:
      - {remote: "b/#", retain: true, no_local: false, retain_as_published: true}
"""
    )
    done = run_edgebus(tmp_path, "check", "edgebus.yaml")
    lines = [line.replace(f"{tmp_path}/", "") for line in done.stderr.strip().splitlines()]
    assert done.returncode == 0, done.stderr
    v5_only = "warning: MQTT 5 only (protocol_version: 5): ignored on MQTT 3.1.1"
    assert [line for line in lines if "warning" in line] == [
        "edgebus.yaml:9 bridges[0].subscriptions[0].retain: warning: on MQTT 3.1.1 the remote"
        " clears the retain flag of live messages: only those retained when the bridge"
        " subscribes are kept (protocol_version: 5 keeps them all)",
        f"edgebus.yaml:10 bridges[0].subscriptions[1].no_local: {v5_only}",
        f"edgebus.yaml:10 bridges[0].subscriptions[1].retain_as_published: {v5_only}",
        f"edgebus.yaml:10 bridges[0].subscriptions[1].retain_handling: {v5_only}",
    ]
