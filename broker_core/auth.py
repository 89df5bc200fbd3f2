"""Authentication: who may connect (MQTT 5.0 section 4.12 for enhanced authentication).

The broker asks its ``Authenticator`` about every CONNECT with an ``AuthRequest``; the
answer is an ``AuthResult``. ``AuthChain`` is the authenticator the gateway builds:

1. A CONNECT with an Authentication Method (MQTT 5 enhanced authentication) goes to the
   ``EnhancedAuthMethod`` registered for that method (SCRAM-SHA-256); an unknown method
   is refused with 0x8C Bad authentication method. The method talks to the client
   through ``request.exchange`` (AUTH packets) and decides alone.
2. A verified client certificate on a listener with ``use_identity_as_username``: the
   certificate's CN is the username and the client is in; nothing else is asked.
3. A client that gave a username or a password: the ``CredentialProvider`` s are asked
   in order (password file, then HTTP service); the first one that knows the client
   decides. When providers exist and none knows the client it is refused with 0x86 Bad
   user name or password, whatever the listener's ``allow_anonymous`` says (mosquitto's
   rule: a username must be valid). Without any provider a username is only a name,
   and the client is anonymous to the listener.
4. Anonymous clients: the listener's ``allow_anonymous``; refused with 0x87 Not
   authorized.

Reason codes: wrong credentials 0x86 (MQTT 3.1.1 CONNACK return code 4), not allowed
0x87 (return code 5), provider unreachable 0x88 Server unavailable (return code 3).

``ListenerPolicy`` is the chain without providers or methods: the broker's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.reason_codes import ReasonCode

__all__ = [
    "AuthChain",
    "AuthExchange",
    "AuthRequest",
    "AuthResult",
    "Authenticator",
    "CredentialProvider",
    "EnhancedAuthMethod",
    "ListenerPolicy",
    "new_auth_request",
]


class AuthExchange(Protocol):
    """The AUTH packets of one enhanced authentication (MQTT 5.0 section 4.12)."""

    async def challenge(self, data: bytes | None) -> bytes | None:
        """Sends AUTH 0x18 with ``data``; returns the Authentication Data of the
        client's answering AUTH 0x18. Raises ``ProtocolError`` for a wrong answer."""
        ...


@dataclass(frozen=True, slots=True)
class AuthRequest:
    client_id: str
    username: str | None
    password: bytes | None
    peer: str | None
    listener: ListenerSettings
    protocol_level: int
    certificate_identity: str | None = None  # the verified client certificate's CN
    auth_method: str | None = None  # MQTT 5 Authentication Method of CONNECT / AUTH 0x19
    auth_data: bytes | None = None  # its Authentication Data
    exchange: AuthExchange | None = None  # set when auth_method is
    reauthentication: bool = False  # AUTH 0x19 on an established connection

    @property
    def peer_host(self) -> str | None:
        """The address part of ``peer`` (``host:port``)."""
        if self.peer is None:
            return None
        host, _, _ = self.peer.rpartition(":")
        return host or None


# Every field positionally, fast (one per CONNECT: see fastinit).
new_auth_request = frozen_factory(AuthRequest)


@dataclass(frozen=True, slots=True)
class AuthResult:
    allowed: bool
    reason_code: int = ReasonCode.SUCCESS
    username: str | None = None  # the identity used from now on (ACL %u, origin)
    auth_data: bytes | None = None  # enhanced authentication: CONNACK / AUTH 0x00 data
    # The password file entry the client proved (the object of the file's table, shared:
    # no copy); None for every other way in. A reload that removes or changes it
    # disconnects the client (``broker_core.auth_file.disconnect_revoked``).
    credential: object | None = None

    @classmethod
    def refuse(cls, reason_code: int = ReasonCode.NOT_AUTHORIZED) -> AuthResult:
        return cls(False, reason_code)


# Allowed without a username: one answer for every such CONNECT.
_ALLOWED = AuthResult(True)


class Authenticator(Protocol):
    async def authenticate(self, request: AuthRequest) -> AuthResult: ...

    def decide_now(self, request: AuthRequest) -> AuthResult | None:
        """The answer when nothing has to be awaited (no provider or method to ask),
        else None; the broker then awaits ``authenticate``. Most CONNECTs are decided
        here, without a task of their own."""
        ...


class CredentialProvider(Protocol):
    """Checks a username and password; None when it does not know the client."""

    async def check(self, request: AuthRequest) -> AuthResult | None: ...


class EnhancedAuthMethod(Protocol):
    """One MQTT 5 Authentication Method, e.g. ``SCRAM-SHA-256``."""

    method: str

    async def authenticate(self, request: AuthRequest) -> AuthResult: ...


class AuthChain:
    """Enhanced methods, certificate identity, credential providers, anonymous access."""

    def __init__(
        self,
        providers: Sequence[CredentialProvider] = (),
        methods: Mapping[str, EnhancedAuthMethod] | None = None,
    ) -> None:
        self.providers = tuple(providers)
        self.methods = dict(methods or {})

    async def authenticate(self, request: AuthRequest) -> AuthResult:
        if request.auth_method is not None:
            method = self.methods.get(request.auth_method)
            if method is None or request.exchange is None:
                return AuthResult.refuse(ReasonCode.BAD_AUTHENTICATION_METHOD)
            return await method.authenticate(request)
        result = self.decide_now(request)
        if result is not None:
            return result
        for provider in self.providers:
            result = await provider.check(request)
            if result is not None:
                return result
        return AuthResult.refuse(ReasonCode.BAD_USER_NAME_OR_PASSWORD)

    def decide_now(self, request: AuthRequest) -> AuthResult | None:
        """Steps 2 and 4 of the module; None for steps 1 and 3 (a method or the
        providers must be asked)."""
        if request.auth_method is not None:
            return None
        listener = request.listener
        if listener.use_identity_as_username and request.certificate_identity:
            return AuthResult(True, username=request.certificate_identity)
        if self.providers and (request.username is not None or request.password is not None):
            return None
        if listener.allow_anonymous:
            if request.username is None:
                return _ALLOWED
            return AuthResult(True, username=request.username)
        return AuthResult.refuse(ReasonCode.NOT_AUTHORIZED)


class ListenerPolicy(AuthChain):
    """Anonymous access per listener; a certificate identity counts as a username."""

    def __init__(self) -> None:
        super().__init__()
