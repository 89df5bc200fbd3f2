"""MQTT 5 enhanced authentication with SCRAM-SHA-256 (MQTT 5.0 section 4.12).

::

    Client                                         Server
    CONNECT  Authentication Method "SCRAM-SHA-256"
             Authentication Data   client-first-message  ->
                                 <-  AUTH 0x18  server-first-message
    AUTH 0x18  client-final-message                      ->
                                 <-  CONNACK 0x00, Authentication Method,
                                     Authentication Data server-final-message

A failed exchange (unknown user, wrong proof, malformed or unsupported SCRAM message)
is refused with CONNACK 0x86 Bad user name or password. When CONNECT also carries a
User Name it must be the SCRAM user. Re-authentication (AUTH 0x19 with a new
client-first-message) runs the same exchange and ends with AUTH 0x00 carrying the
server-final-message; it must authenticate the same user.

Users and passwords come from the password file: its hashes are SCRAM's SaltedPassword
(users with a mosquitto hash are unknown to SCRAM). The result carries the entry the
proof was checked against (``AuthResult.credential``): a reload of the file that removes
or changes it disconnects the client, as for a plain password login.
"""

from __future__ import annotations

import logging

from broker_core.auth import AuthRequest, AuthResult
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.passwords import PasswordFile, PasswordHash
from broker_core.scram import METHOD, ScramError, ScramServer

__all__ = ["ScramAuthenticator"]

log = logging.getLogger(__name__)


class ScramAuthenticator:
    method = METHOD

    def __init__(self, passwords: PasswordFile) -> None:
        self.passwords = passwords

    async def authenticate(self, request: AuthRequest) -> AuthResult:
        exchange = request.exchange
        if exchange is None:
            raise ValueError("SCRAM needs an AUTH exchange")
        proved: list[PasswordHash] = []  # the entry the exchange checks the proof against

        def lookup(username: str) -> PasswordHash | None:
            stored = self.passwords.scram_lookup(username)
            if stored is not None:
                proved.append(stored)
            return stored

        server = ScramServer(lookup)
        try:
            server_first = server.client_first(request.auth_data or b"")
            if request.username is not None and request.username != server.username:
                raise ScramError("other-error", "the CONNECT user name is not the SCRAM user")
            client_final = await exchange.challenge(server_first)
            server_final = server.client_final(client_final or b"")
        except ScramError as exc:
            log.info(
                "SCRAM authentication of %s failed: %s",
                request.client_id,
                exc,
                extra={"client_id": request.client_id},
            )
            return AuthResult.refuse(ReasonCode.BAD_USER_NAME_OR_PASSWORD)
        return AuthResult(
            True,
            username=server.username,
            auth_data=server_final,
            credential=proved[-1] if proved else None,
        )
