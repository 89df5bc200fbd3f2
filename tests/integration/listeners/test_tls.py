"""The ``tls`` listener: MQTT over TLS 1.2/1.3, mutual TLS, the certificate CN as username."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
import uvloop

from broker_core.errors import ConfigError
from broker_core.listeners.tls import server_ssl_context
from gateway.app import Gateway
from gateway.config import parse_config
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient, count_publishes
from tests.helpers.timeouts import unit
from tests.integration.broker.support import BOTH
from tests.integration.listeners.pki import Pki
from tests.integration.listeners.support import client_usernames, listener_client, tls_probe

NOT_AUTHORIZED_V311 = 0x05


def tls_config(pki: Pki, name: str = "tls", **tls: Any) -> str:
    """YAML (JSON is YAML) for one tls listener on 127.0.0.1:0 named ``name``."""
    listener: dict[str, Any] = {
        "type": "tls",
        "name": name,
        "bind": "127.0.0.1:0",
        "tls": {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key), **tls},
    }
    allow_anonymous = listener["tls"].pop("allow_anonymous", None)
    if allow_anonymous is not None:
        listener["allow_anonymous"] = allow_anonymous
    return json.dumps({"listeners": [listener]})


def mtls(pki: Pki, **tls: Any) -> str:
    return tls_config(pki, cafile=str(pki.ca), verify_peer=True, **tls)


def assert_pub_sub(gw: RunningGateway, pki: Pki, proto: int, cert: Any = None) -> None:
    context = pki.client_context(cert)
    with (
        listener_client(gw, "tls", proto, tls=context) as sub,
        listener_client(gw, "tls", proto, tls=pki.client_context(cert)) as pub,
    ):
        assert sub.subscribe("tls/t", 1) == [1]
        pub.publish("tls/t", b"over tls", qos=1)
        message = sub.expect_message()
        assert (message.topic, message.payload) == ("tls/t", b"over tls")


@BOTH
def test_paho_over_tls(tmp_path: Path, pki: Pki, proto: int) -> None:
    with running_gateway(tmp_path, tls_config(pki)) as gw:
        assert_pub_sub(gw, pki, proto)


def test_plain_mqtt_on_a_tls_listener_gets_no_connack(tmp_path: Path, pki: Pki) -> None:
    from tests.helpers.raw_client import RawClient

    with (
        running_gateway(tmp_path, tls_config(pki)) as gw,
        RawClient(*gw.address("tls")) as raw,
    ):
        raw.send(mb.gen_connect("plain"), allow_closed=True)
        raw.expect_closed()


@BOTH
def test_mutual_tls_client_certificate_accepted(tmp_path: Path, pki: Pki, proto: int) -> None:
    config = mtls(pki, fail_if_no_peer_cert=True)
    with running_gateway(tmp_path, config) as gw:
        assert_pub_sub(gw, pki, proto, pki.client("device-1"))


def test_missing_client_certificate_refused(tmp_path: Path, pki: Pki) -> None:
    config = mtls(pki, fail_if_no_peer_cert=True)
    with running_gateway(tmp_path, config) as gw:
        address = gw.address("tls")
        outcome = tls_probe(address, pki.client_context(), mb.gen_connect("no-cert"))
        assert isinstance(outcome, str), f"expected a refusal, got {outcome!r}"
        accepted = tls_probe(
            address, pki.client_context(pki.client("device-1")), mb.gen_connect("with-cert")
        )
        assert not isinstance(accepted, str)
        assert (accepted.name, accepted.reason_code) == ("CONNACK", 0)
        assert "no-cert" not in client_usernames(gw)


@pytest.mark.parametrize("fail_if_no_peer_cert", [True, False], ids=["required", "optional"])
def test_certificate_from_another_ca_refused(
    tmp_path: Path, pki: Pki, fail_if_no_peer_cert: bool
) -> None:
    config = mtls(pki, fail_if_no_peer_cert=fail_if_no_peer_cert)
    with running_gateway(tmp_path, config) as gw:
        address = gw.address("tls")
        context = pki.client_context(pki.stranger("device-1"))
        outcome = tls_probe(address, context, mb.gen_connect("stranger"))
        assert isinstance(outcome, str), f"expected a refusal, got {outcome!r}"
        trusted = pki.client_context(pki.client("device-1"))
        accepted = tls_probe(address, trusted, mb.gen_connect("trusted"))
        assert not isinstance(accepted, str)
        assert (accepted.name, accepted.reason_code) == ("CONNACK", 0)
        assert "stranger" not in client_usernames(gw)


@BOTH
def test_certificate_cn_is_the_username(tmp_path: Path, pki: Pki, proto: int) -> None:
    config = mtls(
        pki, fail_if_no_peer_cert=True, use_identity_as_username=True, allow_anonymous=False
    )
    with running_gateway(tmp_path, config) as gw:
        context = pki.client_context(pki.client("sensor-7"))
        with listener_client(gw, "tls", proto, client_id="cn-client", tls=context) as client:
            assert client.connack is not None
            assert client.connack.reason_code == 0
            assert client_usernames(gw) == {"cn-client": "sensor-7"}


def test_certificate_cn_replaces_a_username_sent(tmp_path: Path, pki: Pki) -> None:
    config = mtls(pki, use_identity_as_username=True)
    with running_gateway(tmp_path, config) as gw:
        context = pki.client_context(pki.client("sensor-8"))
        with listener_client(gw, "tls", client_id="cn2", tls=context, username="claimed"):
            assert client_usernames(gw) == {"cn2": "sensor-8"}


def test_optional_certificate_falls_back_to_username(tmp_path: Path, pki: Pki) -> None:
    """verify_peer without fail_if_no_peer_cert: a client without a certificate completes
    TLS and is judged on its CONNECT (here: anonymous refused, no password provider)."""
    config = mtls(pki, use_identity_as_username=True, allow_anonymous=False)
    with running_gateway(tmp_path, config) as gw:
        address = gw.address("tls")
        refused = tls_probe(address, pki.client_context(), mb.gen_connect("no-cert"))
        assert not isinstance(refused, str), f"TLS refused the client: {refused}"
        assert (refused.name, refused.reason_code) == ("CONNACK", NOT_AUTHORIZED_V311)
        context = pki.client_context(pki.client("sensor-9"))
        accepted = tls_probe(address, context, mb.gen_connect("with-cert"))
        assert not isinstance(accepted, str)
        assert (accepted.name, accepted.reason_code) == ("CONNACK", 0)


def test_no_certificate_identity_without_verify_peer(tmp_path: Path, pki: Pki) -> None:
    with running_gateway(tmp_path, tls_config(pki)) as gw:
        context = pki.client_context(pki.client("ignored"))
        with listener_client(gw, "tls", client_id="plain-tls", tls=context):
            assert client_usernames(gw) == {"plain-tls": None}
            identities = gw.call(lambda: [c.certificate_identity for c in gw.broker.connections])
            assert identities == [None]


def test_tls13_only_listener_refuses_a_tls12_client(tmp_path: Path, pki: Pki) -> None:
    with running_gateway(tmp_path, tls_config(pki, min_version="1.3")) as gw:
        address = gw.address("tls")
        old = pki.client_context(max_version=ssl.TLSVersion.TLSv1_2)
        outcome = tls_probe(address, old, mb.gen_connect("tls12"))
        assert isinstance(outcome, str), f"expected a refusal, got {outcome!r}"
        with listener_client(gw, "tls", client_id="tls13", tls=pki.client_context()) as client:
            sock = client.client.socket()
            assert isinstance(sock, ssl.SSLSocket)
            assert sock.version() == "TLSv1.3"


def test_tls12_accepted_by_default(tmp_path: Path, pki: Pki) -> None:
    with running_gateway(tmp_path, tls_config(pki)) as gw:
        old = pki.client_context(max_version=ssl.TLSVersion.TLSv1_2)
        with listener_client(gw, "tls", client_id="tls12", tls=old) as client:
            sock = client.client.socket()
            assert isinstance(sock, ssl.SSLSocket)
            assert sock.version() == "TLSv1.2"


def test_encrypted_key_with_password(tmp_path: Path, pki: Pki) -> None:
    pair = pki.encrypted_server_key(b"s3cret")
    config = json.dumps(
        {
            "listeners": [
                {
                    "type": "tls",
                    "name": "tls",
                    "bind": "127.0.0.1:0",
                    "tls": {
                        "certfile": str(pair.cert),
                        "keyfile": str(pair.key),
                        "keyfile_password": "s3cret",
                    },
                }
            ]
        }
    )
    with running_gateway(tmp_path, config) as gw:
        assert_pub_sub(gw, pki, 4)
    with pytest.raises(ConfigError, match="keyfile_password"):
        server_ssl_context(pair.cert, pair.key, keyfile_password="wrong")


def test_missing_key_file_is_a_config_error_naming_it(tmp_path: Path, pki: Pki) -> None:
    missing = tmp_path / "nowhere" / "server.key"
    config = parse_config(
        json.dumps(
            {
                "listeners": [
                    {
                        "type": "tls",
                        "name": "secure",
                        "bind": "127.0.0.1:0",
                        "tls": {"certfile": str(pki.server.cert), "keyfile": str(missing)},
                    }
                ],
                "persistence": "memory",
                "data_dir": str(tmp_path / "data"),
            }
        ),
        "test.yaml",
    )
    errors: list[ConfigError] = []
    try:
        asyncio.run(Gateway(config).run())
    except* ConfigError as group:  # what `edgebus run` prints
        errors.extend(e for e in group.exceptions if isinstance(e, ConfigError))
    assert len(errors) == 1
    assert str(missing) in str(errors[0])
    assert "listener 'secure' tls.keyfile" in str(errors[0])


def test_unusable_files_are_config_errors_naming_them(tmp_path: Path, pki: Pki) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    with pytest.raises(ConfigError) as caught:
        server_ssl_context(not_pem, pki.server.key)
    assert str(not_pem) in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        server_ssl_context(pki.server.cert, pki.server.key, cafile=not_pem, verify_peer=True)
    assert f"tls.cafile: {str(not_pem)!r} is not a PEM bundle" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        server_ssl_context(pki.server.cert, pki.server.key, ciphers="NO-SUCH-CIPHER")
    assert "tls.ciphers" in str(caught.value)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_publisher_closing_its_tls_session_loses_nothing_it_sent(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    """A burst over the read budget, DISCONNECT, then TLS close_notify and a half-close:
    a TLS transport closes as soon as the close_notify arrives (it cannot stay half
    open), and what arrived before it is still routed (tests/integration/broker/
    test_half_close.py is the same over plain TCP)."""
    count = 20_000
    listeners = json.loads(tls_config(pki))["listeners"]
    listeners.append({"type": "tcp", "name": "tcp", "bind": "127.0.0.1:0"})
    config = json.dumps(
        {
            "listeners": listeners,
            "api": {"enabled": False},
            "mqtt": {"max_queued_messages": 1_000_000, "max_queued_bytes": "1GB"},
        }
    )
    loops = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    with (
        running_gateway(tmp_path, config, loops[loop]) as gw,
        RawClient(*gw.address("tcp")) as subscriber,
    ):
        subscriber.do_connect("tls-burst-sub")
        subscriber.subscribe("tls/burst", 0)
        plain = socket.create_connection(gw.address("tls"), timeout=unit(10))
        with pki.client_context(None).wrap_socket(plain, server_hostname="127.0.0.1") as pub:
            pub.sendall(mb.gen_connect("tls-burst-pub"))
            pub.recv(64)  # CONNACK
            frame = mb.gen_publish("tls/burst", b"0123456789abcdef")
            pub.sendall(frame * count + mb.gen_disconnect())
            pub.unwrap().shutdown(socket.SHUT_WR)  # close_notify, then FIN
            received = count_publishes(subscriber.sock, count, unit(30))
    assert received == count
