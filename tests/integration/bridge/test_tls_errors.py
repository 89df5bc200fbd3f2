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
from tests.integration.bridge.support import wait_until
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
