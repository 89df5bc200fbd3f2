"""The identity a verified client certificate gives (``use_identity_as_username``)."""

from __future__ import annotations

import ssl
from typing import Any

__all__ = ["certificate_identity"]


def certificate_identity(ssl_object: Any) -> str | None:
    """The subject CN of the peer's certificate, if the handshake verified one.

    ``getpeercert()`` returns an empty dict or None unless the certificate was verified,
    so a listener without ``verify_peer`` never yields an identity.
    """
    try:
        cert = ssl_object.getpeercert()
    except (ValueError, ssl.SSLError):  # handshake not complete
        return None
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and value:
                return str(value)
    return None
