"""Authentication by an HTTP service (NanoMQ's ``auth.http``, EMQX's HTTP authenticator).

For a client with credentials the provider sends one request to the configured URL:

- ``POST`` (default): a JSON object ``{"clientid", "username", "password", "peerhost",
  "protocol", "listener"}``; ``GET``: the same fields as query parameters (absent
  values omitted). ``password`` is the password's UTF-8 text (undecodable bytes become
  U+FFFD), ``peerhost`` the client's IP address, ``protocol`` the MQTT protocol level
  (3 = 3.1, 4 = 3.1.1, 5 = 5.0) and ``listener`` the listener's name. The configured
  headers are added; redirects are not followed.
- The status decides: 2xx allows (the body is not read); 401 refuses with 0x86 Bad
  user name or password; 403 refuses with 0x87 Not authorized; any other status, a
  timeout or a connection error refuses with 0x88 Server unavailable (3.1.1 return
  code 3) and logs a warning.

Answers 2xx, 401 and 403 are cached for ``cache_ttl_s`` under (client id, username,
SHA-256 of the password): the cache never holds a password in clear, and the peer's
address is not part of the key. Unavailable answers are never cached. The cache holds
at most ``cache_size`` entries; past that the least recently used goes.

The provider owns its ``aiohttp.ClientSession`` (created on first use, one pool of
keep-alive connections); ``aclose()`` closes it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from broker_core.auth import AuthRequest, AuthResult
from broker_core.mqtt.reason_codes import ReasonCode

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HttpAuthProvider"]

log = logging.getLogger(__name__)

_CacheKey = tuple[str, str | None, bytes | None]


class HttpAuthProvider:
    def __init__(
        self,
        url: str,
        method: str = "POST",
        timeout_s: float = 5.0,
        cache_ttl_s: float = 60.0,
        headers: Mapping[str, str] | None = None,
        cache_size: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if method not in ("POST", "GET"):
            raise ValueError(f"method must be POST or GET, got {method!r}")
        self.url = url
        self.method = method
        self.timeout_s = timeout_s
        self.cache_ttl_s = cache_ttl_s
        self.headers = dict(headers or {})
        self.cache_size = cache_size
        self._clock = clock
        self._cache: OrderedDict[_CacheKey, tuple[float, AuthResult]] = OrderedDict()
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0

    async def check(self, request: AuthRequest) -> AuthResult:
        key: _CacheKey | None = None
        if self.cache_ttl_s > 0:
            password = request.password
            digest = None if password is None else hashlib.sha256(password).digest()
            key = (request.client_id, request.username, digest)
            hit = self._cache.get(key)
            if hit is not None:
                expires, result = hit
                if self._clock() < expires:
                    self._cache.move_to_end(key)
                    return result
                del self._cache[key]
        result = await self._ask(request)
        if key is not None and result.reason_code != ReasonCode.SERVER_UNAVAILABLE:
            self._cache[key] = (self._clock() + self.cache_ttl_s, result)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return result

    def clear_cache(self) -> None:
        self._cache.clear()

    async def aclose(self) -> None:
        session = self._session
        self._session = None
        if session is not None:
            await session.close()

    # -- internals ----------------------------------------------------------------------------

    def _fields(self, request: AuthRequest) -> dict[str, Any]:
        password = request.password
        return {
            "clientid": request.client_id,
            "username": request.username,
            "password": None if password is None else password.decode("utf-8", "replace"),
            "peerhost": request.peer_host,
            "protocol": request.protocol_level,
            "listener": request.listener.name,
        }

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        session = self._session
        if session is None or session.closed:
            session = self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s), headers=self.headers
            )
        return session

    async def _ask(self, request: AuthRequest) -> AuthResult:
        import aiohttp

        fields = self._fields(request)
        session = self._client()
        self.requests_sent += 1
        try:
            if self.method == "POST":
                response_cm = session.post(self.url, json=fields, allow_redirects=False)
            else:
                params = {k: str(v) for k, v in fields.items() if v is not None}
                response_cm = session.get(self.url, params=params, allow_redirects=False)
            async with response_cm as response:
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("HTTP authentication at %s failed: %r", self.url, exc)
            return AuthResult.refuse(ReasonCode.SERVER_UNAVAILABLE)
        if 200 <= status < 300:
            return AuthResult(True, username=request.username)
        if status == 401:
            return AuthResult.refuse(ReasonCode.BAD_USER_NAME_OR_PASSWORD)
        if status == 403:
            return AuthResult.refuse(ReasonCode.NOT_AUTHORIZED)
        log.warning("HTTP authentication at %s answered status %d", self.url, status)
        return AuthResult.refuse(ReasonCode.SERVER_UNAVAILABLE)
