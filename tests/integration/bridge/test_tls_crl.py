"""A bridge's ``tls.crlfile`` (the listeners' key): the remote server's certificate is
checked against the CRL. A revoked certificate is refused, named as such in the
bridge's status ("certificate revoked ... tls.crlfile '...' lists it"), and the bridge
keeps reconnecting with backoff; the file is read with each connection, so a CRL that
no longer lists the certificate lets the next attempt connect, without a restart.
``edgebus check`` names a missing or unusable CRL file and a ``crlfile`` without
``verify``.

Before, ``crlfile`` was an unknown key in a bridge's ``tls`` (``edgebus check``:
"unknown key") and a bridge had no way to refuse a revoked server certificate.

The remote is a second gateway with a ``tls`` listener on 127.0.0.1:0 serving the
test CA's server certificate; CA, certificates and CRLs made with ``cryptography``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
import uvloop
from click.testing import CliRunner

from gateway.cli import main
from tests.helpers.gateway import running_gateway
from tests.integration.bridge.support import wait_until
from tests.integration.components.support import API, status_of
from tests.integration.listeners.pki import Pki
from tests.integration.security.tls_support import write_crl


def _remote_config(pki: Pki) -> str:
    return f"""
listeners:
  - type: tls
    bind: "127.0.0.1:0"
    tls: {{certfile: "{pki.server.cert}", keyfile: "{pki.server.key}"}}
"""


def _bridge_config(port: int, pki: Pki, crl: Path) -> str:
    return f"""{API}
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    tls: {{cafile: "{pki.ca}", crlfile: "{crl}"}}
    forwards: [{{local: "up/#"}}]
"""


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_revoked_server_certificate_is_refused_until_the_crl_lifts_it(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    crl = write_crl(pki, tmp_path / "ca.crl", [pki.server])
    with (
        running_gateway(tmp_path / "remote", _remote_config(pki)) as remote,
        running_gateway(
            tmp_path / "gw",
            _bridge_config(remote.port, pki, crl),
            uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop,
        ) as gw,
    ):
        status = wait_until(
            lambda: status_of(gw, "bridge", "cloud"),
            lambda s: s["component_stats"].get("connect_failures", 0) >= 2,
        )
        assert status["component_stats"]["connects"] == 0
        expected = (
            f"TLS with 127.0.0.1:{remote.port} failed: certificate verify failed: certificate"
            f" revoked (OpenSSL verify code 23); tls.crlfile '{crl}' lists it"
        )
        assert expected in status["reason"]
        # The CA lifts the revocation (an older CRL put back works the same).
        lifted = write_crl(pki, tmp_path / "ca.crl.new", [], age_s=600)
        os.replace(lifted, crl)
        stamp = time.time() + 5
        os.utime(crl, (stamp, stamp))
        status = wait_until(
            lambda: status_of(gw, "bridge", "cloud"),
            lambda s: s["component_stats"].get("connects", 0) >= 1,
        )
        assert status["state"] == "running", status


def check(tmp_path: Path, tls: dict[str, object]) -> tuple[int, list[str], Path]:
    config = tmp_path / "edgebus.yaml"
    bridge = {"name": "cloud", "server": "127.0.0.1:8883", "tls": tls,
              "forwards": [{"local": "up/#"}]}  # fmt: skip
    # one key per line, so that every key has its own line number
    config.write_text(
        json.dumps({"listeners": [], "persistence": "memory", "api": {"enabled": False},
                    "bridges": [bridge]}, indent=1)
    )  # fmt: skip
    result = CliRunner().invoke(main, ["check", str(config)], prog_name="edgebus")
    return result.exit_code, result.output.splitlines(), config


@pytest.mark.parametrize("problem", [None, "missing", "not a CRL", "without verify"])
def test_check_names_the_bridge_crlfile_problem(
    tmp_path: Path, pki: Pki, problem: str | None
) -> None:
    crl = write_crl(pki, tmp_path / "ca.crl", [])
    tls: dict[str, object] = {"cafile": str(pki.ca), "crlfile": str(crl)}
    if problem is None:
        code, lines, config = check(tmp_path, tls)
        assert (code, lines) == (0, [f"{config}: OK"])
        return
    if problem == "missing":
        tls["crlfile"] = str(tmp_path / "nowhere.crl")
        expected = f"cannot read {str(tmp_path / 'nowhere.crl')!r}: No such file or directory"
    elif problem == "not a CRL":
        tls["crlfile"] = str(pki.ca)
        expected = f"{str(pki.ca)!r} holds no PEM certificate revocation list (X509 CRL)"
    else:
        tls["verify"] = False
        expected = "only works with 'verify: true'"
    code, lines, config = check(tmp_path, tls)
    assert code == 2, lines
    line = next(
        n for n, text in enumerate(config.read_text().splitlines(), 1) if '"crlfile"' in text
    )
    assert lines == [f"{config}:{line} bridges[0].tls.crlfile: {expected}"]
