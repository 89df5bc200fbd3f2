"""Test certificates made on the fly with ``cryptography`` (no private key is committed).

``Pki.create(directory)`` writes PEM files for one test session:

- ``ca``: the CA that signs the server certificate and the trusted client certificates;
- ``server``: CN ``edgebus-test-server``, SAN ``IP:127.0.0.1`` and ``DNS:localhost``;
- ``client(cn)``: a client certificate signed by ``ca`` with subject CN ``cn``;
- ``stranger(cn)``: a client certificate signed by another CA, which the broker must refuse;
- ``server_for(stem, *names, expired=, trusted=)``: another server certificate, for other
  names, expired, or signed by the other CA, which a client must refuse.

Keys are EC P-256: fast to make, accepted at OpenSSL's default security level.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPair", "Pki"]


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


@dataclass
class _Authority:
    name: str
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    path: Path


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "edgebus tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _validity(
    builder: x509.CertificateBuilder, *, expired: bool = False
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    if expired:  # valid for a day, ended an hour ago
        return builder.not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(
            now - datetime.timedelta(hours=1)
        )
    return builder.not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(
        now + datetime.timedelta(days=2)
    )


#: The names of ``Pki.server``.
_SERVER_NAMES: tuple[x509.GeneralName, ...] = (
    x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
    x509.DNSName("localhost"),
)


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path, password: bytes | None) -> None:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _make_ca(directory: Path, name: str) -> _Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(name)
    builder = (
        _validity(x509.CertificateBuilder())
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    cert = builder.sign(key, hashes.SHA256())
    path = directory / f"{name}.crt"
    _write_cert(cert, path)
    return _Authority(name, cert, key, path)


def _issue(
    authority: _Authority,
    directory: Path,
    cn: str,
    *,
    server: bool,
    file_stem: str,
    password: bytes | None = None,
    names: tuple[x509.GeneralName, ...] = _SERVER_NAMES,
    expired: bool = False,
) -> CertPair:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _validity(x509.CertificateBuilder(), expired=expired)
        .subject_name(_name(cn))
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(list(names)),
            critical=False,
        )
    cert = builder.sign(authority.key, hashes.SHA256())
    pair = CertPair(directory / f"{file_stem}.crt", directory / f"{file_stem}.key")
    _write_cert(cert, pair.cert)
    _write_key(key, pair.key, password)
    return pair


@dataclass
class Pki:
    directory: Path
    _ca: _Authority
    _other_ca: _Authority
    server: CertPair
    _clients: dict[tuple[str, str], CertPair] = field(default_factory=dict)

    @classmethod
    def create(cls, directory: Path) -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        ca = _make_ca(directory, "test-ca")
        other = _make_ca(directory, "other-ca")
        server = _issue(ca, directory, "edgebus-test-server", server=True, file_stem="server")
        return cls(directory, ca, other, server)

    @property
    def ca(self) -> Path:
        """PEM of the CA trusted by the broker (``cafile``) and by clients."""
        return self._ca.path

    def client(self, cn: str) -> CertPair:
        """A client certificate with subject CN ``cn``, signed by the trusted CA."""
        return self._client(self._ca, cn)

    def stranger(self, cn: str) -> CertPair:
        """A client certificate with subject CN ``cn``, signed by an untrusted CA."""
        return self._client(self._other_ca, cn)

    def encrypted_server_key(self, password: bytes) -> CertPair:
        """Another server certificate whose key is encrypted with ``password``."""
        return _issue(
            self._ca,
            self.directory,
            "edgebus-test-server",
            server=True,
            file_stem="server-encrypted",
            password=password,
        )

    def server_for(
        self, file_stem: str, *names: str, expired: bool = False, trusted: bool = True
    ) -> CertPair:
        """Another server certificate, for DNS ``names`` only (not 127.0.0.1 unless
        named); ``expired``: its validity ended an hour ago; ``trusted=False``: signed by
        the other CA. For clients' verification errors."""
        return _issue(
            self._ca if trusted else self._other_ca,
            self.directory,
            "edgebus-test-server",
            server=True,
            file_stem=file_stem,
            names=tuple(
                x509.IPAddress(ipaddress.ip_address(name))
                if name.replace(".", "").isdigit()
                else x509.DNSName(name)
                for name in names
            ),
            expired=expired,
        )

    def _client(self, authority: _Authority, cn: str) -> CertPair:
        key = (authority.name, cn)
        if key not in self._clients:
            stem = f"client-{authority.name}-{cn}"
            self._clients[key] = _issue(authority, self.directory, cn, server=False, file_stem=stem)
        return self._clients[key]

    def client_context(
        self,
        cert: CertPair | None = None,
        *,
        max_version: ssl.TLSVersion | None = None,
    ) -> ssl.SSLContext:
        """A client-side context trusting ``ca``, presenting ``cert`` if given."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(cert.cert, cert.key)
        if max_version is not None:
            context.maximum_version = max_version
        return context
