"""``tls.crlfile``: client certificates revoked by a CRL are refused.

A revoked certificate fails the handshake with the ``certificate_revoked`` alert and gets
no CONNACK; one the CRL does not list connects. The file is read again when it changes,
so a revocation takes effect for the next handshake without a restart, and connections
already up stay. ``edgebus check`` names a missing or unusable CRL file, and a
``crlfile`` without ``verify_peer``, with file, line and YAML path.

Before, ``crlfile`` was an unknown key (``edgebus check``: "unknown key") and nothing
could revoke a client certificate: the probe's revoked-1.crt connected.

Through a real TLS listener of a running gateway, with Python's ssl client, on asyncio's
loop and on uvloop's; CA, certificates and CRLs made with ``cryptography``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gateway.cli import main
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import CertPair, Pki
from tests.integration.listeners.support import tls_probe
from tests.integration.security.tls_support import (
    LOOPS,
    metric,
    metrics_text,
    tls_gateway,
    write_crl,
)

TLS_LOGGER = "broker_core.listeners.tls"
V12, V13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
REVOKED = "TLS refused: SSLV3_ALERT_CERTIFICATE_REVOKED"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


def mtls(pki: Pki, crl: Path) -> dict[str, Any]:
    return {
        "cafile": str(pki.ca),
        "crlfile": str(crl),
        "verify_peer": True,
        "fail_if_no_peer_cert": True,
    }


def probe(gw: RunningGateway, pki: Pki, cert: CertPair, version: ssl.TLSVersion) -> object:
    context = pki.client_context(cert, max_version=version)
    context.minimum_version = version
    return tls_probe(gw.address("tls"), context, mb.gen_connect(f"c{time.monotonic_ns()}"))


def read_packet(tls: ssl.SSLSocket) -> mb.Packet:
    data = b""
    while (split := mb.split_packet(data)) is None:
        chunk = tls.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return mb.parse_packet(split[0])


def accepted(answer: object) -> bool:
    return isinstance(answer, mb.Packet) and (answer.name, answer.reason_code) == ("CONNACK", 0)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("version", [V12, V13])
def test_revoked_certificate_refused_others_accepted(
    tmp_path: Path,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
    loop: str,
    version: ssl.TLSVersion,
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    revoked, good = pki.client("revoked-1"), pki.client("sensor-7")
    crl = write_crl(pki, tmp_path / "ca.crl", [revoked])
    with tls_gateway(tmp_path, pki, loop, **mtls(pki, crl)) as gw:
        assert probe(gw, pki, revoked, version) == REVOKED
        assert accepted(probe(gw, pki, good, version))
        family = "edgebus_tls_handshake_failures_total"
        deadline = time.monotonic() + unit(10)
        while metric(metrics_text(gw), family, listener="tls", reason="certificate_revoked") != 1:
            assert time.monotonic() < deadline, metrics_text(gw)
            time.sleep(0.02)
    messages = [r.getMessage() for r in caplog.records if r.name == TLS_LOGGER]
    assert any("failed: certificate revoked" in m for m in messages), messages


@pytest.mark.parametrize("loop", LOOPS)
def test_a_new_crl_file_revokes_without_restart(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    device = pki.client("device-to-revoke")
    crl = write_crl(pki, tmp_path / "ca.crl", [], age_s=600)
    with (
        tls_gateway(tmp_path, pki, loop, **mtls(pki, crl)) as gw,
        socket.create_connection(gw.address("tls"), timeout=unit(5)) as raw,
        pki.client_context(device).wrap_socket(raw, server_hostname="127.0.0.1") as up,
    ):
        up.sendall(mb.gen_connect("up-before"))
        assert accepted(read_packet(up))
        # The CA publishes a newer CRL listing the device; the file is replaced.
        newer = write_crl(pki, tmp_path / "ca.crl.new", [device], age_s=60)
        os.replace(newer, crl)
        stamp = time.time() + 5  # a later modification time than the first file's
        os.utime(crl, (stamp, stamp))
        for version in (V12, V13):
            assert probe(gw, pki, device, version) == REVOKED
        up.sendall(mb.gen_pingreq())  # the connection made before stays
        assert read_packet(up).name == "PINGRESP"
        # and back: a still newer CRL without it (a revocation lifted)
        newest = write_crl(pki, tmp_path / "ca.crl.new", [], age_s=0)
        os.replace(newest, crl)
        os.utime(crl, (stamp + 5, stamp + 5))
        assert accepted(probe(gw, pki, device, V12))
    messages = [r.getMessage() for r in caplog.records if r.name == TLS_LOGGER]
    assert sum(f"CRL {crl} read again" in m for m in messages) == 2, messages


def crls_loaded(gw: RunningGateway) -> int:
    """The CRLs in the store of the context the listener's next handshake uses."""
    [tls] = gw.gateway._tls
    return int(gw.call(lambda: tls.for_handshake().cert_store_stats()["crl"]))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_crl_no_longer_listing_a_certificate_admits_it_without_restart(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    """The CRL file replaced by one that does not list the certificate any more, but
    is not newer than the one loaded (the CA's CRL from before the revocation, put
    back; a hold released by a CA that keeps its lastUpdate): the next handshake is
    accepted. Before, each change added the file's CRL to the running context's store,
    OpenSSL went on using the latest lastUpdate (the revoking one) until a restart, and
    the store grew by one CRL per change."""
    device = pki.client("device-on-hold")
    crl = write_crl(pki, tmp_path / "ca.crl", [device], age_s=60)
    with tls_gateway(tmp_path, pki, loop, **mtls(pki, crl)) as gw:
        stamp = time.time()
        for change in range(1, 4):
            assert probe(gw, pki, device, V12) == REVOKED
            older = write_crl(pki, tmp_path / "ca.crl.new", [], age_s=600)
            os.replace(older, crl)
            os.utime(crl, (stamp + 10 * change, stamp + 10 * change))
            assert accepted(probe(gw, pki, device, V12)), f"change {change}"
            assert accepted(probe(gw, pki, device, V13)), f"change {change}"
            # and revoked again by the file as it was
            revoking = write_crl(pki, tmp_path / "ca.crl.new", [device], age_s=60)
            os.replace(revoking, crl)
            os.utime(crl, (stamp + 10 * change + 5, stamp + 10 * change + 5))
            assert crls_loaded(gw) == 1


@pytest.mark.parametrize("loop", ["asyncio"])
def test_an_unreadable_new_crl_keeps_the_one_loaded(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    caplog.set_level(logging.INFO, logger=TLS_LOGGER)
    revoked = pki.client("revoked-2")
    crl = write_crl(pki, tmp_path / "ca.crl", [revoked])
    with tls_gateway(tmp_path, pki, loop, **mtls(pki, crl)) as gw:
        assert probe(gw, pki, revoked, V12) == REVOKED
        crl.write_text("not a CRL\n")
        stamp = time.time() + 5
        os.utime(crl, (stamp, stamp))
        assert probe(gw, pki, revoked, V12) == REVOKED
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.name == TLS_LOGGER and r.levelno == logging.ERROR
    ]
    assert errors == [
        f"listener tls: tls.crlfile: {str(crl)!r} holds no PEM certificate revocation list"
        " (X509 CRL); the TLS files read before stay in use"
    ]


def check(tmp_path: Path, tls: dict[str, object]) -> tuple[int, list[str], Path]:
    config = tmp_path / "edgebus.yaml"
    listener = {"type": "tls", "name": "mtls", "bind": "127.0.0.1:0", "tls": tls}
    # one key per line, so that every key has its own line number
    config.write_text(
        json.dumps({"listeners": [listener], "persistence": "memory", "api": {"enabled": False}},
                   indent=1)
    )  # fmt: skip
    result = CliRunner().invoke(main, ["check", str(config)], prog_name="edgebus")
    return result.exit_code, result.output.splitlines(), config


def line_of(path: Path, text: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_check_accepts_a_crl(tmp_path: Path, pki: Pki) -> None:
    crl = write_crl(pki, tmp_path / "ca.crl", [pki.client("x")])
    tls = {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key), **mtls(pki, crl)}
    code, lines, config = check(tmp_path, tls)
    assert (code, lines) == (0, [f"{config}: OK"])


@pytest.mark.parametrize("problem", ["missing", "not a CRL", "without verify_peer"])
def test_check_names_the_crlfile_problem(tmp_path: Path, pki: Pki, problem: str) -> None:
    crl = write_crl(pki, tmp_path / "ca.crl", [])
    tls = {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key), **mtls(pki, crl)}
    if problem == "missing":
        tls["crlfile"] = str(tmp_path / "nowhere.crl")
        expected = f"cannot read {str(tmp_path / 'nowhere.crl')!r}: No such file or directory"
    elif problem == "not a CRL":
        tls["crlfile"] = str(pki.ca)  # a certificate, not a CRL
        expected = f"{str(pki.ca)!r} holds no PEM certificate revocation list (X509 CRL)"
    else:
        tls["verify_peer"] = tls["fail_if_no_peer_cert"] = False
        expected = "only works with 'verify_peer: true'"
    code, lines, config = check(tmp_path, tls)
    assert code == 2
    line = line_of(config, '"crlfile"')
    where = f"{config}:{line} listeners[0].tls.crlfile"
    assert lines == [f"{where}: {expected}"]
