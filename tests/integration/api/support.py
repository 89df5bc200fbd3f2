"""A small HTTP client for the API tests (urllib: no dependency beyond the stdlib).

``Http(base, auth)`` sends requests with a default authentication (``bearer(key)``,
``api_key(key)``, ``basic(user, password)`` or ``None``) and returns a ``Reply``
whatever the status: the tests assert on statuses, 4xx included.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from tests.helpers.timeouts import unit

__all__ = ["KEY", "PASSWORD", "USER", "Http", "Reply", "api_key", "basic", "bearer"]

KEY = "test-key-0123456789abcdef"
USER = "operator"
PASSWORD = "op-password-1"

Headers = dict[str, str]


def bearer(key: str) -> Headers:
    return {"Authorization": f"Bearer {key}"}


def api_key(key: str) -> Headers:
    return {"X-API-Key": key}


def basic(user: str, password: str) -> Headers:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


class Http:
    def __init__(self, base: str, auth: Headers | None = None) -> None:
        self.base = base
        self.auth = auth

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        auth: Headers | bool | None = True,
        headers: Headers | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        """``auth=True``: the default authentication; a dict: those headers; None: none."""
        data = raw
        all_headers: Headers = {}
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        if auth is True:
            all_headers.update(self.auth or {})
        elif isinstance(auth, dict):
            all_headers.update(auth)
        all_headers.update(headers or {})
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers=all_headers
        )
        try:
            with urllib.request.urlopen(request, timeout=unit(10)) as response:
                return Reply(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as error:
            return Reply(error.code, dict(error.headers), error.read())

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.request("POST", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Reply:
        return self.request("DELETE", path, **kwargs)
