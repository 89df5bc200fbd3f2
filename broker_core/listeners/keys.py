"""Loading a certificate and its private key into an ``ssl.SSLContext``, never prompting.

``ssl.SSLContext.load_cert_chain(certfile, keyfile, password=None)`` lets OpenSSL ask
for the pass phrase of an encrypted key on the terminal ("Enter PEM pass phrase:"): a
command started from a terminal waits there forever (a reload freezes the event loop),
one without a terminal fails with ``OSError: [Errno 22]``. ``load_key_pair`` always hands
OpenSSL a password callback instead, so an encrypted key without a password is a
problem to report: the listeners' contexts, the bridges' client contexts and the
configuration's file checks all load keys through it.
"""

from __future__ import annotations

import ssl
from pathlib import Path

__all__ = ["load_key_pair"]


def load_key_pair(
    context: ssl.SSLContext, certfile: Path, keyfile: Path | None, keyfile_password: str | None
) -> tuple[str, str] | None:
    """Load ``certfile`` and ``keyfile`` into ``context``; ``(option, message)`` saying
    why not, or None. An empty or None ``keyfile_password`` means the key is not
    encrypted: an encrypted one is reported as needing ``keyfile_password``."""
    asked = False

    def password() -> bytes:
        nonlocal asked
        asked = True  # OpenSSL asks only for an encrypted key
        return keyfile_password.encode() if keyfile_password else b""

    try:
        context.load_cert_chain(certfile, keyfile, password=password)
    except (ssl.SSLError, ValueError, OSError) as exc:
        if asked and not keyfile_password:
            return ("keyfile", f"{str(keyfile)!r} is encrypted: set keyfile_password")
        return (
            "certfile",
            f"cannot load {str(certfile)!r} with keyfile {str(keyfile)!r} (not PEM,"
            f" not a pair, or a wrong or missing keyfile_password): {exc}",
        )
    return None
