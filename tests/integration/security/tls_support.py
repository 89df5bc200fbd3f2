"""Helpers of the TLS security tests: expired client certificates and CRLs made with
``cryptography`` on top of the listener tests' ``Pki``, a gateway with one TLS listener,
a probe that tells the TLS alert a refused client got, and ``/metrics`` samples.

Every wait is bounded and written in timeout units (``tests.helpers.timeouts.unit``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import re
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import uvloop
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import CertPair, Pki, _issue

__all__ = [
    "LOOPS",
    "expired_client",
    "metric",
    "metrics_text",
    "tls_gateway",
    "write_crl",
]

API_KEY = "tls-tests-key-0123456789"

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def expired_client(pki: Pki, cn: str) -> CertPair:
    """A client certificate signed by the trusted CA whose validity ended an hour ago."""
    return _issue(pki._ca, pki.directory, cn, server=False, file_stem=f"expired-{cn}", expired=True)


def write_crl(pki: Pki, path: Path, revoked: Sequence[CertPair], *, age_s: int = 60) -> Path:
    """A PEM CRL of the trusted CA revoking ``revoked``, issued ``age_s`` seconds ago
    (a later CRL of the same CA is younger: OpenSSL uses the latest)."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(pki._ca.cert.subject)
        .last_update(now - datetime.timedelta(seconds=age_s))
        .next_update(now + datetime.timedelta(days=1))
    )
    for pair in revoked:
        serial = x509.load_pem_x509_certificate(pair.cert.read_bytes()).serial_number
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(serial)
            .revocation_date(now - datetime.timedelta(seconds=age_s))
            .build()
        )
    crl = builder.sign(pki._ca.key, hashes.SHA256())
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    return path


@contextlib.contextmanager
def tls_gateway(
    tmp_path: Path,
    pki: Pki,
    loop: str = "asyncio",
    kind: str = "tls",
    **tls: Any,
) -> Iterator[RunningGateway]:
    """A gateway with one listener of ``kind`` (``tls`` or ``wss``) named ``tls``
    (``pki``'s server certificate, the ``tls`` options given) and its HTTP API on
    127.0.0.1:0."""
    listener = {
        "type": kind,
        "name": "tls",
        "bind": "127.0.0.1:0",
        "tls": {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key), **tls},
    }
    config = json.dumps({"listeners": [listener], "api": {"keys": [API_KEY]}})
    with running_gateway(tmp_path / "gw", config, LOOPS[loop]) as gw:
        yield gw


def metrics_text(gw: RunningGateway) -> str:
    address = gw.gateway.api_address
    assert address is not None
    url = f"http://{address[0]}:{address[1]}/metrics"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=unit(5)) as reply:
        text: str = reply.read().decode()
    return text


def metric(text: str, family: str, **labels: str) -> float | None:
    """The value of the sample of ``family`` with ``labels`` in the Prometheus text, or
    None when there is none."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{family}\{{(.*)\}} (\S+)", line)
        if match is None:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(2))
    return None
