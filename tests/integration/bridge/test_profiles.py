"""The EMQX Cloud and AWS IoT Core profiles against mosquitto stand-ins: TLS with a
password file, mutual TLS with the certificate's identity as the user name; ALPN."""

from __future__ import annotations

import asyncio
import ssl
import threading
from pathlib import Path

import pytest

from tests.helpers.brokers import free_port
from tests.helpers.gateway import running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import (
    PASSWORD,
    USER,
    Collector,
    Remote,
    paho_client,
    wait_until,
)
from tests.integration.components.support import status_of
from tests.integration.listeners.pki import Pki


def _roundtrip(gw_port: int, remote: Remote, topic: str, expect: str) -> None:
    cloud = Collector(remote.port, "#", "cloud-sub")
    try:
        local = paho_client("local-pub")
        local.connect("127.0.0.1", gw_port)
        local.loop_start()
        local.publish(topic, b"hello", qos=1).wait_for_publish(unit(5))
        wait_until(cloud.count, lambda n: n >= 1)
        assert cloud.messages == [(expect, b"hello")]
        local.disconnect()
        local.loop_stop()
    finally:
        cloud.close()


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_emqx_cloud_profile_over_tls_with_a_password(
    tmp_path: Path, secure_remote: Remote, pki: Pki, version: str
) -> None:
    config = f"""
bridges:
  - name: emqx
    type: emqx_cloud
    server: "127.0.0.1:{secure_remote.tls_port}"
    protocol_version: "{version}"
    username: {USER}
    password: {PASSWORD}
    tls: {{cafile: "{pki.ca}"}}
    forwards: [{{local: "up/{{rest#}}", remote: "emqx/{{rest}}"}}]
"""
    with running_gateway(tmp_path, config) as gw:
        wait_until(lambda: status_of(gw, "bridge", "emqx")["state"], lambda s: s == "running")
        _roundtrip(gw.port, secure_remote, "up/a/b", "emqx/a/b")


def test_a_wrong_password_is_reported_and_retried(
    tmp_path: Path, secure_remote: Remote, pki: Pki
) -> None:
    config = f"""
bridges:
  - name: emqx
    type: emqx_cloud
    server: "127.0.0.1:{secure_remote.tls_port}"
    username: {USER}
    password: wrong
    reconnect_backoff: 100ms
    tls: {{cafile: "{pki.ca}"}}
    forwards: [{{local: "up/#"}}]
"""
    with running_gateway(tmp_path, config) as gw:
        status = wait_until(
            lambda: status_of(gw, "bridge", "emqx"),
            lambda s: s["component_stats"].get("connect_failures", 0) >= 2,
        )
        assert status["state"] == "degraded"
        assert "refused the connection" in status["reason"]
        assert "0x86" in status["reason"] or "0x87" in status["reason"]


def test_aws_iot_profile_with_mutual_tls(tmp_path: Path, secure_remote: Remote, pki: Pki) -> None:
    device = pki.client("gw-thing-1")
    config = f"""
bridges:
  - name: aws
    type: aws_iot
    server: "127.0.0.1:{secure_remote.mtls_port}"
    aws: {{region: eu-west-1, thing_name: gw-thing-1}}
    tls: {{cafile: "{pki.ca}", certfile: "{device.cert}", keyfile: "{device.key}"}}
    forwards: [{{local: "telemetry/{{rest#}}", remote: "dt/gw-thing-1/{{rest}}", qos: 2}}]
"""
    with running_gateway(tmp_path, config) as gw:
        wait_until(lambda: status_of(gw, "bridge", "aws")["state"], lambda s: s == "running")
        assert gw.call(lambda: gw.gateway.components.instance("bridge", "aws").client_id) == (
            "gw-thing-1"
        )
        _roundtrip(gw.port, secure_remote, "telemetry/temp", "dt/gw-thing-1/temp")


def test_a_certificate_the_remote_does_not_trust_is_refused(
    tmp_path: Path, secure_remote: Remote, pki: Pki
) -> None:
    stranger = pki.stranger("gw-thing-1")
    config = f"""
bridges:
  - name: aws
    type: aws_iot
    server: "127.0.0.1:{secure_remote.mtls_port}"
    aws: {{region: eu-west-1, thing_name: gw-thing-1}}
    reconnect_backoff: 100ms
    tls: {{cafile: "{pki.ca}", certfile: "{stranger.cert}", keyfile: "{stranger.key}"}}
    forwards: [{{local: "telemetry/#"}}]
"""
    with running_gateway(tmp_path, config) as gw:
        status = wait_until(
            lambda: status_of(gw, "bridge", "aws"),
            lambda s: s["component_stats"].get("connect_failures", 0) >= 1,
        )
        assert status["state"] == "degraded"


def test_alpn_is_offered(tmp_path: Path, pki: Pki) -> None:
    """AWS IoT Core on port 443 wants ALPN ``x-amzn-mqtt-ca``: a TLS server records what
    the bridge offers."""
    port = free_port()
    offered: list[str | None] = []
    ready = threading.Event()
    stop = threading.Event()

    def serve() -> None:
        async def main() -> None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(pki.server.cert, pki.server.key)
            context.set_alpn_protocols(["x-amzn-mqtt-ca"])

            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                offered.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
                writer.close()

            server = await asyncio.start_server(handle, "127.0.0.1", port, ssl=context)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)
            server.close()

        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(unit(5))
    device = pki.client("gw-thing-1")
    config = f"""
bridges:
  - name: aws
    type: aws_iot
    server: "127.0.0.1:{port}"
    reconnect_backoff: 100ms
    aws: {{region: eu-west-1, thing_name: gw-thing-1}}
    tls:
      cafile: "{pki.ca}"
      certfile: "{device.cert}"
      keyfile: "{device.key}"
      alpn: [x-amzn-mqtt-ca]
    forwards: [{{local: "t/#"}}]
"""
    try:
        with running_gateway(tmp_path, config):
            wait_until(lambda: list(offered), lambda o: len(o) >= 1)
    finally:
        stop.set()
        thread.join(unit(5))
    assert offered[0] == "x-amzn-mqtt-ca"


@pytest.mark.parametrize(
    ("tls", "connects"),
    [
        ('{{cafile: "{ca}", server_name: localhost}}', True),  # a name of the certificate
        ('{{cafile: "{ca}", server_name: not-this-host}}', False),  # the name is checked
        ("{{verify: false}}", True),  # no CA trusts it, and nothing is verified
        ("{{}}", False),  # the system's CAs do not know the test CA
    ],
)
def test_tls_server_name_and_verification(
    tmp_path: Path, secure_remote: Remote, pki: Pki, tls: str, connects: bool
) -> None:
    config = f"""
bridges:
  - name: b
    server: "127.0.0.1:{secure_remote.tls_port}"
    username: {USER}
    password: {PASSWORD}
    reconnect_backoff: 100ms
    tls: {tls.format(ca=pki.ca)}
    forwards: [{{local: "up/#"}}]
"""
    with running_gateway(tmp_path, config) as gw:
        status = wait_until(
            lambda: status_of(gw, "bridge", "b"),
            lambda s: s["state"] == "running" or s["component_stats"].get("connect_failures", 0),
        )
    if connects:
        assert status["state"] == "running"
    else:
        assert status["state"] == "degraded"
        assert "TLS" in status["reason"] or "certificate" in status["reason"]
