"""A remote whose certificate the bridge refuses: the reason it names in its status, in
the API and in its log is OpenSSL's own (a name mismatch, an expired certificate, an
unknown issuer), not the bare ``CERTIFICATE_VERIFY_FAILED``, and after a name mismatch
the names the certificate is for; and it goes on reconnecting with backoff.

The remote is a second gateway with a ``tls`` listener on 127.0.0.1:0 serving a
certificate made for the case (``Pki.server_for``); the bridging gateway runs on
asyncio's loop and on uvloop's (``edgebus run`` uses uvloop when installed)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import uvloop

from tests.helpers.gateway import running_gateway
from tests.integration.bridge.support import Remote, wait_until
from tests.integration.components.support import API, http_of, status_of
from tests.integration.listeners.pki import CertPair, Pki


def _remote_config(cert: CertPair) -> str:
    return f"""
listeners:
  - type: tls
    bind: "127.0.0.1:0"
    tls: {{certfile: "{cert.cert}", keyfile: "{cert.key}"}}
"""


def _bridge_config(port: int, cafile: Path, server_name: str | None) -> str:
    name = "" if server_name is None else f", server_name: {server_name}"
    return f"""{API}
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    tls: {{cafile: "{cafile}"{name}}}
    forwards: [{{local: "up/#"}}]
"""


@pytest.mark.parametrize(
    ("case", "server_name", "expected"),
    [
        (
            "other-name",
            None,
            "certificate verify failed: IP address mismatch, certificate is not valid for"
            " '127.0.0.1' (OpenSSL verify code 64); the certificate is for DNS:other.example;"
            " the name verified is the host of `server`",
        ),
        (
            "other-name",
            "localhost",
            "certificate verify failed: Hostname mismatch, certificate is not valid for"
            " 'localhost' (OpenSSL verify code 62); the certificate is for DNS:other.example;"
            " the name verified is tls.server_name",
        ),
        (
            "expired",
            None,
            "certificate verify failed: certificate has expired (OpenSSL verify code 10)",
        ),
        (
            "unknown-ca",
            None,
            "certificate verify failed: unable to get local issuer certificate (OpenSSL"
            " verify code 20); its issuer is not among the CAs trusted: tls.cafile",
        ),
    ],
    ids=["ip-mismatch", "hostname-mismatch", "expired", "unknown-ca"],
)
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_refused_certificate_is_reported_with_its_cause(
    tmp_path: Path,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
    case: str,
    server_name: str | None,
    expected: str,
    loop: str,
) -> None:
    cert = {
        "other-name": lambda: pki.server_for("other-name", "other.example"),
        "expired": lambda: pki.server_for("expired", "127.0.0.1", "localhost", expired=True),
        "unknown-ca": lambda: pki.server_for("unknown-ca", "127.0.0.1", trusted=False),
    }[case]()
    caplog.set_level(logging.INFO, logger="bridge.bridge")
    with (
        running_gateway(tmp_path / "remote", _remote_config(cert)) as remote,
        running_gateway(
            tmp_path / "gw",
            _bridge_config(remote.port, pki.ca, server_name),
            uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop,
        ) as gw,
    ):
        # Refused again and again, with backoff: never connected, the cause each time.
        status = wait_until(
            lambda: status_of(gw, "bridge", "cloud"),
            lambda s: s["component_stats"].get("connect_failures", 0) >= 3,
        )
        assert status["state"] == "degraded"
        assert status["component_stats"]["connects"] == 0
        prefix = f"TLS with 127.0.0.1:{remote.port} failed: {expected}"
        assert prefix in status["reason"]
        assert "reconnecting in" in status["reason"]

        view = http_of(gw).get("/api/v1/bridges/cloud").json()
        assert view["state"] == "degraded"
        assert prefix in view["reason"]
        assert view["link"]["reason"].startswith(prefix)

    logged = [r.getMessage() for r in caplog.records if r.name == "bridge.bridge"]
    assert any(prefix in line and "reconnecting in" in line for line in logged)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_tls_to_a_plain_port_and_plain_tcp_to_a_tls_port_are_named_as_such(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    """A mosquitto with a plain listener and a TLS one: a bridge with ``tls`` to the plain
    port fails in the TLS handshake (mosquitto resets the connection on the ClientHello);
    a plain bridge to the TLS port is reset before its CONNACK. Each reason says what
    probably happened, as a question, rather than "cannot connect" or "connection lost"."""
    caplog.set_level(logging.INFO, logger="bridge.bridge")
    with Remote(tmp_path / "remote", pki) as remote:
        config = f"""{API}
bridges:
  - name: tls-to-plain
    server: "127.0.0.1:{remote.port}"
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    tls: {{cafile: "{pki.ca}"}}
    forwards: [{{local: "up/#"}}]
  - name: plain-to-tls
    server: "127.0.0.1:{remote.tls_port}"
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    forwards: [{{local: "up/#"}}]
"""
        plain, tls = f"127.0.0.1:{remote.port}", f"127.0.0.1:{remote.tls_port}"
        tls_hint = f"(is {tls} a TLS port? tls is not enabled for this bridge)"
        # What the TLS listener does with a CONNECT: it resets the connection (the CONNECT's
        # bytes unread), or closes it, or sends an alert first: one of these, each a hint.
        expected = {
            "tls-to-plain": [
                f"TLS handshake with {plain} failed: the remote closed the connection"
                f" (is {plain} a plain MQTT port? the bridge has tls enabled)"
            ],
            "plain-to-tls": [
                f"connection to {tls} closed before CONNACK: Connection reset by peer {tls_hint}",
                f"connection to {tls} closed by the remote before CONNACK {tls_hint}",
                f"{tls} answered with TLS, not MQTT {tls_hint}",
            ],
        }
        factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
        with running_gateway(tmp_path / "gw", config, factory) as gw:
            for name, reasons in expected.items():
                status = wait_until(
                    lambda name=name: status_of(gw, "bridge", name),  # type: ignore[misc]
                    lambda s: s["component_stats"].get("connect_failures", 0) >= 2,
                )
                assert status["component_stats"]["connects"] == 0
                assert status["state"] == "degraded"
                assert status["reason"].startswith("reconnecting in ")
                assert status["reason"].split(": ", 1)[1] in reasons
                view = http_of(gw).get(f"/api/v1/bridges/{name}").json()
                assert view["link"]["reason"] in reasons

    logged = [r.getMessage() for r in caplog.records if r.name == "bridge.bridge"]
    for name, reasons in expected.items():
        mine = [line for line in logged if line.startswith(f"bridge {name}: ")]
        assert mine != []
        for line in mine:
            reason, sep, _ = line.removeprefix(f"bridge {name}: ").partition("; reconnecting in ")
            assert sep == "; reconnecting in "
            assert reason in reasons
