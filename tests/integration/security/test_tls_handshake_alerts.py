"""A TLS handshake the broker refuses ends with the TLS alert that says why (RFC 8446 6.2,
RFC 5246 7.2), as mosquitto sends it, is logged at INFO with the peer and the reason, and
is counted in ``edgebus_tls_handshake_failures_total{listener, reason}``.

Before, the loop's SSL protocol closed the socket without writing the alert OpenSSL had
made: every refused client, an old TLS version, a missing, untrusted or expired client
certificate, saw only "unexpected eof while reading", and the reason went to DEBUG.

Through a real TLS listener of a running gateway, with Python's ssl client, on asyncio's
loop and on uvloop's (``edgebus run`` uses uvloop when installed).
"""

from __future__ import annotations

import logging
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import CertPair, Pki
from tests.integration.listeners.support import tls_probe
from tests.integration.security.tls_support import (
    LOOPS,
    expired_client,
    metric,
    metrics_text,
    tls_gateway,
)

TLS_LOGGER = "broker_core.listeners.tls"
V12, V13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3


def mtls(pki: Pki) -> dict[str, Any]:
    return {"cafile": str(pki.ca), "verify_peer": True, "fail_if_no_peer_cert": True}


def client(pki: Pki, cert: CertPair | None, version: ssl.TLSVersion) -> ssl.SSLContext:
    context = pki.client_context(cert, max_version=version)
    context.minimum_version = version
    return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


def wait_for_failures(gw: RunningGateway, reason: str, at_least: int) -> float:
    """``edgebus_tls_handshake_failures_total{listener="tls", reason}`` once it reached
    ``at_least``."""
    deadline = time.monotonic() + unit(10)
    while True:
        family = "edgebus_tls_handshake_failures_total"
        value = metric(metrics_text(gw), family, listener="tls", reason=reason)
        if value is not None and value >= at_least:
            return value
        assert time.monotonic() < deadline, (reason, value)
        time.sleep(0.02)


def wait_for_log(caplog: pytest.LogCaptureFixture, *words: str) -> str:
    deadline = time.monotonic() + unit(10)
    while True:
        for record in list(caplog.records):
            if record.name == TLS_LOGGER and record.levelno >= logging.INFO:
                message = record.getMessage()
                if all(word in message for word in words):
                    return message
        assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
        time.sleep(0.02)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("version", "alert"),
    [(V12, "SSLV3_ALERT_CERTIFICATE_EXPIRED"), (V13, "SSLV3_ALERT_CERTIFICATE_EXPIRED")],
)
def test_expired_client_certificate_gets_certificate_expired(
    tmp_path: Path,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
    loop: str,
    version: ssl.TLSVersion,
    alert: str,
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    expired = expired_client(pki, "expired-device")
    with tls_gateway(tmp_path, pki, loop, **mtls(pki)) as gw:
        answer = tls_probe(gw.address("tls"), client(pki, expired, version), mb.gen_connect("x"))
        assert answer == f"TLS refused: {alert}"
        message = wait_for_log(caplog, "listener tls", "127.0.0.1:", "certificate has expired")
        assert "TLS handshake from 127.0.0.1:" in message
        assert wait_for_failures(gw, "certificate_expired", 1) == 1


@pytest.mark.parametrize("loop", LOOPS)
def test_old_tls_version_gets_protocol_version(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    with tls_gateway(tmp_path, pki, loop, min_version="1.3") as gw:
        answer = tls_probe(gw.address("tls"), client(pki, None, V12), mb.gen_connect("x"))
        assert answer == "TLS refused: TLSV1_ALERT_PROTOCOL_VERSION"
        wait_for_log(caplog, "listener tls", "unsupported protocol")
        assert wait_for_failures(gw, "unsupported_protocol", 1) == 1


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("version", [V12, V13])
def test_certificate_of_another_ca_gets_unknown_ca(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, loop: str, version: ssl.TLSVersion
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    with tls_gateway(tmp_path, pki, loop, **mtls(pki)) as gw:
        stranger = client(pki, pki.stranger("rogue"), version)
        answer = tls_probe(gw.address("tls"), stranger, mb.gen_connect("x"))
        assert answer == "TLS refused: TLSV1_ALERT_UNKNOWN_CA"
        wait_for_log(caplog, "listener tls", "unable to get local issuer certificate")
        assert wait_for_failures(gw, "unknown_ca", 1) == 1


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("version", "alert"),
    [(V12, "SSLV3_ALERT_HANDSHAKE_FAILURE"), (V13, "TLSV13_ALERT_CERTIFICATE_REQUIRED")],
)
def test_missing_client_certificate_gets_its_alert(
    tmp_path: Path,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
    loop: str,
    version: ssl.TLSVersion,
    alert: str,
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    with tls_gateway(tmp_path, pki, loop, **mtls(pki)) as gw:
        answer = tls_probe(gw.address("tls"), client(pki, None, version), mb.gen_connect("x"))
        assert answer == f"TLS refused: {alert}"
        wait_for_log(caplog, "listener tls", "peer did not return a certificate")
        assert wait_for_failures(gw, "peer_did_not_return_a_certificate", 1) == 1


@pytest.mark.parametrize("loop", LOOPS)
def test_a_valid_client_still_connects_and_nothing_is_counted(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    with tls_gateway(tmp_path, pki, loop, **mtls(pki)) as gw:
        for version in (V12, V13):
            context = client(pki, pki.client("sensor-7"), version)
            answer = tls_probe(gw.address("tls"), context, mb.gen_connect(f"ok{version.name}"))
            assert isinstance(answer, mb.Packet)
            assert (answer.name, answer.reason_code) == ("CONNACK", 0)
        text = metrics_text(gw)
        assert "# TYPE edgebus_tls_handshake_failures_total counter" in text
        assert metric(text, "edgebus_tls_handshake_failures_total", listener="tls") is None


@pytest.mark.parametrize("loop", LOOPS)
def test_wss_listener_sends_the_alert_too(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    """A ``wss`` listener accepts through the same TLS listener and context."""
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    expired = expired_client(pki, "expired-ws-device")
    with tls_gateway(tmp_path, pki, loop, kind="wss", **mtls(pki)) as gw:
        for _ in range(2):  # the first connection loads the WebSocket listener
            answer = tls_probe(gw.address("tls"), client(pki, expired, V12), b"GET / HTTP/1.1")
            assert answer == "TLS refused: SSLV3_ALERT_CERTIFICATE_EXPIRED"
        wait_for_log(caplog, "listener tls", "certificate has expired")
        assert wait_for_failures(gw, "certificate_expired", 2) == 2
