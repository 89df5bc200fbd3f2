"""How a secret is shown: ``**********``, and a URL with its user info masked.

Without the web framework: the webhooks (``gateway.webhook``) show their URLs with it
in their counters and log lines, as ``GET /config`` (``gateway.api.routes.admin``)
shows every URL of the configuration.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["MASK", "mask_url"]

MASK = "**********"


def mask_url(url: str) -> str:
    """``url`` with its user info (user name and password) replaced by ``MASK``:
    ``https://user:pw@host/x`` -> ``https://**********@host/x``."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{MASK}@{host}"))
