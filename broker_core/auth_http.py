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

Answers 2xx, 401 and 403 are cached for ``cache_ttl_s`` under the SHA-256 of (client
id, username, password): the cache never holds a password in clear, and a key is 32
bytes however long the client id and user name are; the peer's address is not part of
the key. Unavailable answers are never cached. The cache holds at most ``cache_size``
entries and ``cache_bytes`` bytes (an entry counts ``ENTRY_BYTES`` plus the user name an
allowed answer keeps); past either the least recently used go.

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

#: What one cache entry costs beside the user name it keeps (key, tuple, result, links).
ENTRY_BYTES = 400


class HttpAuthProvider:
    def __init__(
        self,
        url: str,
        method: str = "POST",
        timeout_s: float = 5.0,
        cache_ttl_s: float = 60.0,
        headers: Mapping[str, str] | None = None,
        cache_size: int = 10_000,
        cache_bytes: int = 8_000_000,
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
        self.cache_bytes = cache_bytes
        self._clock = clock
        self._cache: OrderedDict[bytes, tuple[float, AuthResult]] = OrderedDict()
        self._cached_bytes = 0
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0

    async def check(self, request: AuthRequest) -> AuthResult:
        key: bytes | None = None
        if self.cache_ttl_s > 0:
            key = _cache_key(request)
            hit = self._cache.get(key)
            if hit is not None:
                expires, result = hit
                if self._clock() < expires:
                    self._cache.move_to_end(key)
                    return result
                self._forget(key)
        result = await self._ask(request)
        if key is not None and result.reason_code != ReasonCode.SERVER_UNAVAILABLE:
            self._remember(key, result)
        return result

    def clear_cache(self) -> None:
        self._cache.clear()
        self._cached_bytes = 0

    @property
    def cached(self) -> tuple[int, int]:
        """(entries, bytes) the cache holds now."""
        return len(self._cache), self._cached_bytes

    def _remember(self, key: bytes, result: AuthResult) -> None:
        if key in self._cache:
            self._forget(key)
        self._cache[key] = (self._clock() + self.cache_ttl_s, result)
        self._cached_bytes += _entry_bytes(result)
        cache = self._cache
        while cache and (len(cache) > self.cache_size or self._cached_bytes > self.cache_bytes):
            self._forget(next(iter(cache)))

    def _forget(self, key: bytes) -> None:
        _, result = self._cache.pop(key)
        self._cached_bytes -= _entry_bytes(result)

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


def _cache_key(request: AuthRequest) -> bytes:
    """SHA-256 of (client id, user name, password), each length-prefixed."""
    digest = hashlib.sha256()
    for part in (request.client_id.encode(), _text(request.username), request.password):
        if part is None:
            digest.update(b"\xff\xff\xff\xff")
        else:
            digest.update(len(part).to_bytes(4, "big"))
            digest.update(part)
    return digest.digest()


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8", "surrogatepass")


def _entry_bytes(result: AuthResult) -> int:
    return ENTRY_BYTES + len(result.username or "")
