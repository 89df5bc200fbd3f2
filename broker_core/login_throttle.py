"""Failed-login throttling: password guessing costs the guesser time, not the broker.

Failed logins (CONNACK 0x86 Bad user name or password, 0x87 Not authorized, for a
client that presented credentials) are counted per user name and per source address.
After ``free_failures`` failures of a key, each further attempt of that key waits before
its credentials are checked, and the wait doubles with each failure, from ``delay_s`` up
to ``max_delay_s``:

- Waiting happens *before* the password hash is computed, on a timer that costs nothing,
  so a guesser cannot take the CPU or the hashing threads from other users' logins.
- Attempts of a throttled key are spaced one delay apart even when they arrive together
  (each reserves the next slot), so parallel connections do not multiply the guesses.
- An attempt that would have to wait longer than its CONNECT may take (the connect
  timeout) is refused at once, unchecked, with 0x9F Connection rate exceeded (MQTT 3.1.1:
  return code 3, server unavailable).
- A successful login clears its user name's count; an address's count is only
  forgotten ``forget_after_s`` after its last failure, so a guesser with one valid
  account cannot reset it.

Keys are kept for at most ``max_tracked`` user names and addresses together; past that
the least recently failed are forgotten. A guesser who knows the user name of a victim
delays that user's own logins too (up to ``max_delay_s``): the price of throttling per
user name, which is what stops a guesser spread over many addresses.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from broker_core.auth import Authenticator, AuthRequest, AuthResult
from broker_core.clock import now as clock_now
from broker_core.mqtt.reason_codes import ReasonCode

__all__ = ["LoginThrottle", "ThrottleSettings"]

# Refusals that count as failed logins.
_FAILURES = frozenset((ReasonCode.BAD_USER_NAME_OR_PASSWORD, ReasonCode.NOT_AUTHORIZED))


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    free_failures: int = 5
    delay_s: float = 1.0
    max_delay_s: float = 60.0
    forget_after_s: float = 600.0
    max_tracked: int = 10_000


class _Key:
    __slots__ = ("failures", "last_failure", "next_at")

    def __init__(self) -> None:
        self.failures = 0
        self.last_failure = 0.0
        self.next_at = 0.0  # no check of this key's logins before this time


class LoginThrottle:
    def __init__(
        self,
        settings: ThrottleSettings | None = None,
        on_throttled: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings or ThrottleSettings()
        self.on_throttled = on_throttled  # called with "login_throttle" per attempt held
        self._keys: OrderedDict[tuple[str, str], _Key] = OrderedDict()
        self.failures = 0  # failed logins seen
        self.delayed = 0  # attempts that waited before their check
        self.refused = 0  # attempts refused unchecked (0x9F)

    def __len__(self) -> int:
        return len(self._keys)

    async def authenticate(
        self, authenticator: Authenticator, request: AuthRequest, now: float, budget_s: float
    ) -> AuthResult:
        """``authenticator``'s answer to ``request``, throttled. A client that presents no
        credentials (anonymous) is not throttled: no password is checked."""
        if self.passes(request):
            return await authenticator.authenticate(request)
        address = request.peer_host
        wait = self.admit(request.username, address, now, budget_s)
        if wait is None:
            return AuthResult.refuse(ReasonCode.CONNECTION_RATE_EXCEEDED)
        if wait:
            await asyncio.sleep(wait)  # before the password is checked: costs nothing
        result = await authenticator.authenticate(request)
        if result.allowed:
            self.succeeded(request.username)
        elif result.reason_code in _FAILURES:
            self.failed(request.username, address, clock_now())
        return result

    @staticmethod
    def passes(request: AuthRequest) -> bool:
        """A client that presents no credentials (anonymous) is not throttled."""
        return request.auth_method is None and request.username is None and not request.password

    def admit(
        self, username: str | None, address: str | None, now: float, budget_s: float
    ) -> float | None:
        """Seconds to wait before checking this attempt's credentials, or None to refuse
        it unchecked (the wait would exceed ``budget_s``)."""
        throttled = [key for key in self._keys_of(username, address, now) if self._limited(key)]
        if not throttled:
            return 0.0
        start = max(now, *(key.next_at for key in throttled))
        wait = start - now
        if wait > budget_s:
            self.refused += 1
            self._throttled()
            return None
        for key in throttled:
            key.next_at = start + self._delay(key.failures)
        if wait > 0:
            self.delayed += 1
            self._throttled()
        return wait

    def failed(self, username: str | None, address: str | None, now: float) -> None:
        self.failures += 1
        for name in self._names(username, address):
            key = self._keys.pop(name, None) or _Key()
            self._keys[name] = key  # the most recently failed last
            key.failures += 1
            key.last_failure = now
            if self._limited(key):
                key.next_at = max(key.next_at, now + self._delay(key.failures))
        while len(self._keys) > self.settings.max_tracked:
            self._keys.popitem(last=False)

    def succeeded(self, username: str | None) -> None:
        if username is not None:
            self._keys.pop(("user", username), None)

    # -- internals -------------------------------------------------------------------------

    def _throttled(self) -> None:
        if self.on_throttled is not None:
            self.on_throttled("login_throttle")

    @staticmethod
    def _names(username: str | None, address: str | None) -> list[tuple[str, str]]:
        names = []
        if username is not None:
            names.append(("user", username))
        if address:
            names.append(("address", address))
        return names

    def _keys_of(self, username: str | None, address: str | None, now: float) -> list[_Key]:
        keys = []
        for name in self._names(username, address):
            key = self._keys.get(name)
            if key is None:
                continue
            if now - key.last_failure > self.settings.forget_after_s:
                del self._keys[name]
                continue
            keys.append(key)
        return keys

    def _limited(self, key: _Key) -> bool:
        return key.failures >= self.settings.free_failures and key.failures > 0

    def _delay(self, failures: int) -> float:
        settings = self.settings
        over = max(failures - settings.free_failures, 0)
        return float(min(settings.delay_s * 2 ** min(over, 32), settings.max_delay_s))
