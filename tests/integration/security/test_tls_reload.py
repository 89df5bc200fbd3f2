"""A reload (``SIGHUP``) of ``edgebus run`` reads a TLS listener's certificate and key
again: a renewed server certificate (certbot / ACME rotation: new files written over
the old ones) is served from the next handshake, without a restart, and connections
already up stay. A file that cannot be loaded refuses the reload (ERROR "reload refused:
FILE:LINE listeners[0].tls.certfile: ...") and keeps the certificate in use; the
listener goes on serving.

Before, the listener's context was built once at start: after the files were replaced
and SIGHUP sent, new connections were still served the old certificate until a restart.

A real ``edgebus run`` process, a ``tls`` listener on 127.0.0.1:0 (its port read from
the JSON log), Python's ssl client; certificates made with ``cryptography``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.helpers import mqtt_builder as mb
from tests.helpers.json_log import wait_logged
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import CertPair, Pki
from tests.integration.security.tls_support import tls_gateway
from tests.interop.mosquitto.tools import REPO_ROOT, edgebus_command

LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


@contextmanager
def edgebus_tls(tmp_path: Path, cert: Path, key: Path) -> Iterator[tuple[Any, Path, int]]:
    """``edgebus run`` with one tls listener serving ``cert`` and ``key``; yields the
    process, its JSON log and the listener's port."""
    log = tmp_path / "gw.log"
    config = tmp_path / "edgebus.yaml"
    config.write_text(
        "listeners:\n"
        "  - type: tls\n"
        "    name: tls\n"
        f"    bind: {LOOPBACK}:0\n"
        "    tls:\n"
        f"      certfile: {cert}\n"
        f"      keyfile: {key}\n"
        "persistence: memory\n"
        f"data_dir: {tmp_path / 'data'}\n"
        "api: {enabled: false}\n"
        f"logging: {{format: json, file: {log}}}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with (tmp_path / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            [*edgebus_command(), "run", "-c", str(config)],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            env=env,
        )
    try:
        found = wait_logged(log, "listener tls (TLS) bound to", timeout=unit(20), process=process)
        bound = found[0]["message"]
        match = re.search(r"bound to \('127\.0\.0\.1', (\d+)\)", bound)
        assert match is not None, bound
        yield process, log, int(match.group(1))
        process.send_signal(signal.SIGTERM)
        assert process.wait(unit(10)) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(unit(5))


def served_serial(pki: Pki, port: int) -> int:
    """The serial number of the certificate a new TLS connection is served."""
    context = pki.client_context()
    with (
        socket.create_connection((LOOPBACK, port), timeout=unit(5)) as raw,
        context.wrap_socket(raw, server_hostname=LOOPBACK) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(pair: CertPair) -> int:
    return x509.load_pem_x509_certificate(pair.cert.read_bytes()).serial_number


def install(pair: CertPair, cert: Path, key: Path) -> None:
    """Writes ``pair`` over the served files, each renamed into place (as certbot's
    links switch), the key first."""
    for source, target in ((pair.key, key), (pair.cert, cert)):
        shutil.copyfile(source, target.with_suffix(".new"))
        os.replace(target.with_suffix(".new"), target)


def read_packet(tls: ssl.SSLSocket) -> mb.Packet:
    data = b""
    while (split := mb.split_packet(data)) is None:
        chunk = tls.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return mb.parse_packet(split[0])


def test_sighup_serves_a_renewed_certificate_and_keeps_it_on_a_bad_file(
    tmp_path: Path, pki: Pki
) -> None:
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    shutil.copyfile(pki.server.cert, cert)
    shutil.copyfile(pki.server.key, key)
    old = serial_of(pki.server)
    renewed = pki.server_for("server-renewed", "127.0.0.1", "localhost")
    new = serial_of(renewed)
    assert new != old
    with (
        edgebus_tls(tmp_path, cert, key) as (process, log, port),
        socket.create_connection((LOOPBACK, port), timeout=unit(5)) as raw,
        pki.client_context().wrap_socket(raw, server_hostname=LOOPBACK) as up,
    ):
        up.sendall(mb.gen_connect("up-before"))
        assert read_packet(up).name == "CONNACK"
        assert served_serial(pki, port) == old
        # A broken certificate file: the reload is refused naming it (file, line, key),
        # and the old certificate is still served.
        cert.write_text("not a certificate\n")
        process.send_signal(signal.SIGHUP)
        error = wait_logged(log, "reload refused", timeout=unit(20), process=process)[0]
        assert error["level"] == "ERROR"
        assert error["message"].startswith(
            f"reload refused: {tmp_path / 'edgebus.yaml'}:6 listeners[0].tls.certfile:"
            f" cannot load {str(cert)!r}"
        )
        assert served_serial(pki, port) == old
        # The renewed pair: served from the next handshake on.
        install(renewed, cert, key)
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + unit(20)
        while (serial := served_serial(pki, port)) != new:
            assert serial == old
            assert time.monotonic() < deadline, "the renewed certificate is not served"
            time.sleep(0.05)
        info = wait_logged(log, "TLS files read again", timeout=unit(20), process=process)[0]
        assert info["message"] == (
            f"listener tls: TLS files read again ({cert}, {key}); new handshakes use them"
        )
        reloaded = wait_logged(log, "listener tls TLS files", timeout=unit(20), process=process)[0]
        assert reloaded["message"].startswith(f"configuration reloaded from {tmp_path}")
        # the connection made before stays, on its old session
        up.sendall(mb.gen_pingreq())
        assert read_packet(up).name == "PINGRESP"
        assert up.getpeercert(binary_form=True) is not None
    assert (tmp_path / "stderr.log").read_text() == ""


@pytest.mark.parametrize("kind", ["tls", "wss"])
def test_a_reload_without_a_file_rebuilds_tls_and_keeps_it_on_a_bad_certificate(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """A gateway started without a configuration file (``Gateway.reload`` re-reads only
    the password file and the TLS files): a certificate that cannot be loaded is logged
    at ERROR naming it and the one in use stays; a renewed pair is served from the next
    handshake, on ``tls`` and ``wss`` listeners alike."""
    caplog.set_level(logging.INFO, logger="broker_core.listeners.tls")
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    shutil.copyfile(pki.server.cert, cert)
    shutil.copyfile(pki.server.key, key)
    old = serial_of(pki.server)
    renewed = pki.server_for(f"server-renewed-{kind}", "127.0.0.1")
    with tls_gateway(tmp_path, pki, kind=kind, certfile=str(cert), keyfile=str(key)) as gw:
        port = gw.address("tls")[1]
        assert served_serial(pki, port) == old
        cert.write_text("not a certificate\n")
        assert gw.call(gw.gateway.reload) == ["password_file", "acl_cache"]
        assert served_serial(pki, port) == old
        install(renewed, cert, key)
        assert gw.call(gw.gateway.reload) == [
            "password_file",
            "acl_cache",
            "listener tls TLS files",
        ]
        assert served_serial(pki, port) == serial_of(renewed)
        assert gw.call(gw.gateway.reload) == ["password_file", "acl_cache"]  # nothing new
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"listener tls: tls.certfile: cannot load {str(cert)!r}")
    assert errors[0].endswith("; the TLS files read before stay in use")
