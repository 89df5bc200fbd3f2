"""Authentication: who may connect (MQTT 5.0 section 4.12 for enhanced authentication).

The broker asks its ``Authenticator`` about every CONNECT with an ``AuthRequest``; the
answer is an ``AuthResult``. ``ListenerPolicy`` is the default: it admits clients on
listeners that allow anonymous access and refuses the others, so a listener with
``allow_anonymous: false`` and no credential provider lets nobody in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.reason_codes import ReasonCode

__all__ = ["AuthRequest", "AuthResult", "Authenticator", "ListenerPolicy"]


@dataclass(frozen=True, slots=True)
class AuthRequest:
    client_id: str
    username: str | None
    password: bytes | None
    peer: str | None
    listener: ListenerSettings
    protocol_level: int
    certificate_identity: str | None = None  # the verified client certificate's CN


@dataclass(frozen=True, slots=True)
class AuthResult:
    allowed: bool
    reason_code: int = ReasonCode.SUCCESS
    username: str | None = None  # the identity used from now on (ACL %u, origin)

    @classmethod
    def refuse(cls, reason_code: int = ReasonCode.NOT_AUTHORIZED) -> AuthResult:
        return cls(False, reason_code)


class Authenticator(Protocol):
    async def authenticate(self, request: AuthRequest) -> AuthResult: ...


class ListenerPolicy:
    """Anonymous access per listener; a certificate identity counts as a username."""

    async def authenticate(self, request: AuthRequest) -> AuthResult:
        username = request.username
        if request.listener.use_identity_as_username and request.certificate_identity:
            username = request.certificate_identity
        if request.listener.allow_anonymous:
            return AuthResult(True, username=username)
        if request.listener.use_identity_as_username and request.certificate_identity:
            return AuthResult(True, username=username)
        return AuthResult.refuse(ReasonCode.NOT_AUTHORIZED)
