"""SCRAM-SHA-256 (RFC 5802, RFC 7677), both ends, without I/O.

::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>

    SaltedPassword  = Hi(Normalize(password), salt, i)   (PBKDF2-HMAC-SHA256, 32 bytes)
    ClientKey       = HMAC(SaltedPassword, "Client Key");  StoredKey = SHA-256(ClientKey)
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The server keeps only what ``broker_core.passwords`` stores (salt, iterations,
SaltedPassword) and derives StoredKey and ServerKey from it. Channel binding
(SCRAM-SHA-256-PLUS, gs2 flag ``p=``), an authorization identity other than the user
and mandatory extensions (``m=``) are not supported and fail the exchange. An unknown
user gets a made-up salt and the default iteration count, so the answer does not tell
whether the user exists; the exchange then fails at the proof.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker_core.passwords import DEFAULT_ITERATIONS, PasswordHash, normalize_password

__all__ = [
    "METHOD",
    "ScramClient",
    "ScramError",
    "ScramKeys",
    "ScramServer",
    "decode_saslname",
    "encode_saslname",
]

METHOD = "SCRAM-SHA-256"

_FAKE_SALT_KEY = secrets.token_bytes(32)  # per process: stable fake salts for unknown users


class ScramError(ValueError):
    """The exchange failed; ``error`` is the RFC 5802 ``server-error`` value."""

    def __init__(self, error: str, detail: str = "") -> None:
        super().__init__(f"{error}: {detail}" if detail else error)
        self.error = error


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramError("invalid-encoding", f"{what} is not base64") from None


def encode_saslname(name: str) -> str:
    """``=`` and ``,`` escaped as ``=3D`` and ``=2C`` (RFC 5802 section 5.1)."""
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "=":
            escape = text[i : i + 3]
            if escape == "=2C":
                out.append(",")
            elif escape == "=3D":
                out.append("=")
            else:
                raise ScramError("invalid-username-encoding", f"bad escape {escape!r}")
            i += 3
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _valid_nonce(nonce: str) -> bool:
    return bool(nonce) and all("\x21" <= char <= "\x7e" and char != "," for char in nonce)


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("invalid-encoding", f"{what} is not UTF-8") from None


def _new_nonce() -> str:
    return secrets.token_urlsafe(18)


@dataclass(frozen=True, slots=True)
class ScramKeys:
    """What the server needs of a user: StoredKey and ServerKey, salt, iterations."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(cls, salt: bytes, iterations: int, salted: bytes) -> ScramKeys:
        client_key = _hmac(salted, b"Client Key")
        return cls(
            salt, iterations, hashlib.sha256(client_key).digest(), _hmac(salted, b"Server Key")
        )

    @classmethod
    def from_password_hash(cls, stored: PasswordHash) -> ScramKeys:
        return cls.from_salted_password(stored.salt, stored.iterations, stored.salted_password)


class ScramServer:
    """One server-side exchange: ``client_first`` then ``client_final``.

    ``lookup(username)`` returns the user's ``PasswordHash`` or None.
    """

    def __init__(
        self,
        lookup: Callable[[str], PasswordHash | None],
        nonce_factory: Callable[[], str] = _new_nonce,
    ) -> None:
        self._lookup = lookup
        self._nonce_factory = nonce_factory
        self.username: str | None = None
        self._keys: ScramKeys | None = None
        self._known = False
        self._gs2_header = ""
        self._nonce = ""
        self._auth_prefix = ""

    def client_first(self, data: bytes) -> bytes:
        """Reads client-first-message; returns server-first-message."""
        if self._keys is not None:
            raise RuntimeError("client_first() called twice")
        text = _decode(data, "client-first-message")
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2:
            raise ScramError("other-error", "malformed client-first-message")
        if flag.startswith("p="):
            raise ScramError("channel-binding-not-supported")
        if flag not in ("n", "y"):
            raise ScramError("other-error", f"bad gs2 channel binding flag {flag!r}")
        attrs = bare.split(",")
        if attrs[0].startswith("m="):
            raise ScramError("extensions-not-supported")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
            raise ScramError("other-error", "expected n=<user>,r=<nonce>")
        username = decode_saslname(attrs[0][2:])
        if not username:
            raise ScramError("other-error", "empty username")
        if authzid and (not authzid.startswith("a=") or decode_saslname(authzid[2:]) != username):
            raise ScramError("other-error", "authorization identity differs from the user")
        client_nonce = attrs[1][2:]
        if not _valid_nonce(client_nonce):
            raise ScramError("other-error", "bad client nonce")
        stored = self._lookup(username)
        if stored is None:
            salt = _hmac(_FAKE_SALT_KEY, username.encode("utf-8"))[:16]
            keys = ScramKeys(salt, DEFAULT_ITERATIONS, secrets.token_bytes(32), b"")
        else:
            keys = ScramKeys.from_password_hash(stored)
            self._known = True
        self.username = username
        self._keys = keys
        self._gs2_header = f"{flag},{authzid},"
        self._nonce = client_nonce + self._nonce_factory()
        server_first = f"r={self._nonce},s={_b64(keys.salt)},i={keys.iterations}"
        self._auth_prefix = f"{bare},{server_first},"
        return server_first.encode("ascii")

    def client_final(self, data: bytes) -> bytes:
        """Reads client-final-message; returns server-final-message or raises ScramError."""
        keys = self._keys
        if keys is None:
            raise RuntimeError("client_final() before client_first()")
        text = _decode(data, "client-final-message")
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("other-error", "no proof in client-final-message")
        attrs = without_proof.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise ScramError("other-error", "expected c=<binding>,r=<nonce>,...,p=<proof>")
        if _unb64(attrs[0][2:], "channel binding") != self._gs2_header.encode("utf-8"):
            raise ScramError("channel-bindings-dont-match")
        if attrs[1][2:] != self._nonce:
            raise ScramError("other-error", "nonce mismatch")
        proof = _unb64(proof_text, "proof")
        auth_message = (self._auth_prefix + without_proof).encode("utf-8")
        signature = _hmac(keys.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("invalid-proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        valid = hmac.compare_digest(hashlib.sha256(client_key).digest(), keys.stored_key)
        if not (valid and self._known):
            raise ScramError("invalid-proof")
        return f"v={_b64(_hmac(keys.server_key, auth_message))}".encode("ascii")


class ScramClient:
    """The client side (for bridges and tests): ``first``, ``final``, ``verify``."""

    def __init__(self, username: str, password: str | bytes, nonce: str | None = None) -> None:
        self.username = username
        self._password = password
        self._nonce = _new_nonce() if nonce is None else nonce
        self._bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _decode(server_first, "server-first-message")
        attrs = dict(
            (part[:1], part[2:]) for part in text.split(",") if len(part) >= 2 and part[1] == "="
        )
        nonce, salt_text, iterations_text = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_text is None or iterations_text is None:
            raise ScramError("other-error", "malformed server-first-message")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramError("other-error", "the server nonce does not extend ours")
        if not iterations_text.isdigit():
            raise ScramError("other-error", "bad iteration count")
        salt = _unb64(salt_text, "salt")
        salted = hashlib.pbkdf2_hmac(
            "sha256", normalize_password(self._password), salt, int(iterations_text)
        )
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        keys = ScramKeys.from_salted_password(salt, int(iterations_text), salted)
        client_key = _hmac(salted, b"Client Key")
        signature = _hmac(keys.stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(keys.server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def verify(self, server_final: bytes) -> bool:
        """True when the server proved it knows the password too."""
        text = _decode(server_final, "server-final-message")
        if self._server_signature is None or not text.startswith("v="):
            return False
        signature = _unb64(text[2:].split(",")[0], "server signature")
        return hmac.compare_digest(signature, self._server_signature)
