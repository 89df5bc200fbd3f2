"""How a secret is shown: ``**********``, and a URL with its secrets masked.

Without the web framework: the webhooks (``gateway.webhook``) show their URLs masked
in their counters and log lines, as ``GET /config`` (``gateway.api.routes.admin``)
shows every URL of the configuration.

A URL's secrets are its user info (``https://user:pw@host/``) and the values of the
query parameters whose names say they carry one (``is_secret_parameter``: ``token``,
``api_key``, ``sig``, AWS's ``X-Amz-Signature``...). The other query parameters stay
readable (``?kind=ops``), so two webhooks to one endpoint can be told apart. EMQX masks
secrets by the same kind of name list (``emqx_utils_redact:is_sensitive_key``) in its
configuration and headers, but shows a webhook's path and query as written. A secret in
the path itself (``/services/T0/B0/XXXX``) is not recognized.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "SECRET_PARAMETER_NAMES",
    "SECRET_PARAMETER_PARTS",
    "is_secret_parameter",
    "mask_secrets",
    "mask_url",
    "url_secrets",
]

MASK = "**********"

#: query parameters whose value is masked, by their whole name (compared in lower case)
SECRET_PARAMETER_NAMES = frozenset({"key", "sig", "auth", "authorization", "pass", "pwd", "jwt"})
#: ... or by a part of their name: ``token`` covers ``access_token``, ``X-Amz-Security-Token``
#: and ``sessionToken``; ``signature`` covers ``X-Amz-Signature`` and ``X-Goog-Signature``
SECRET_PARAMETER_PARTS = (
    "token",
    "secret",
    "passw",
    "signature",
    "credential",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "private_key",
)

# One parameter of a query: name, and "=value" when it has one. Both separators count
# ("&" and the older ";"), so a server that splits on either finds no secret shown.
_PARAMETER = re.compile(r"(?P<name>[^&;=]*)(?P<value>=[^&;]*)?")


def is_secret_parameter(name: str) -> bool:
    """Whether the query parameter ``name`` (percent-encoded as written, any case)
    carries a secret."""
    name = unquote_plus(name).strip().lower()
    return name in SECRET_PARAMETER_NAMES or any(part in name for part in SECRET_PARAMETER_PARTS)


def _is_secret(parameter: re.Match[str]) -> bool:
    """A parameter with a value (``name=`` has none) and a name that says it is secret."""
    value = parameter["value"]
    return value is not None and len(value) > 1 and is_secret_parameter(parameter["name"])


def _mask_query(query: str) -> str:
    return _PARAMETER.sub(lambda p: f"{p['name']}={MASK}" if _is_secret(p) else p[0], query)


def mask_url(url: str) -> str:
    """``url`` with its user info (user name and password) and the values of its secret
    query parameters replaced by ``MASK``, the rest as written:
    ``https://user:pw@host/x?kind=a&token=t`` ->
    ``https://**********@host/x?kind=a&token=**********``."""
    parts = urlsplit(url)
    masked = parts._replace(query=_mask_query(parts.query))
    if parts.username is not None or parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 address, bracketed again
            host = f"[{host}]"
        if parts.port is not None:
            host += f":{parts.port}"
        masked = masked._replace(netloc=f"{MASK}@{host}")
    return url if masked == parts else urlunsplit(masked)


def url_secrets(url: str) -> frozenset[str]:
    """The secrets of ``url`` (its user name and password, the values of its secret
    query parameters), each as written, percent-decoded and percent-encoded: the forms in
    which an HTTP client's error message may repeat them (``mask_secrets``)."""
    parts = urlsplit(url)
    written = [s for s in (parts.username, parts.password) if s]
    written += [p["value"][1:] for p in _PARAMETER.finditer(parts.query) if _is_secret(p)]
    found: set[str] = set()
    for secret in written:
        for decoded in (unquote(secret), unquote_plus(secret)):
            encoded = (quote(decoded), quote(decoded, safe=""), quote_plus(decoded))
            found.update((secret, decoded, *encoded))
    return frozenset(s for s in found if s)


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` replaced by ``MASK`` (the
    longest first, so that no part of a longer one is left)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text
