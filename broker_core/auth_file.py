"""Username and password against the password file (``broker_core.passwords``).

The provider knows the users listed in the file and no one else: for any other
username, or a client without a username, it answers None and the next provider of
the ``AuthChain`` is asked. A known user with a wrong or missing password is refused
with 0x86 Bad user name or password. The slow hash runs in a worker thread, off the
event loop.

An accepted client keeps the entry it proved (``AuthResult.credential``, then
``Session.credential``): a reference to the object of the file's table, not a copy, and
never the password. ``disconnect_revoked`` runs after a reload of the file (``SIGHUP``,
``POST /reload``) and disconnects each client whose entry the file no longer has, or
has with another hash, as mosquitto does on ``SIGHUP``: MQTT 5 clients get DISCONNECT
0x87 Not authorized, MQTT 3.1.1 and 3.1 clients a closed connection. Their sessions stay
(a persistent one goes offline and keeps its subscriptions and queue); the will is
published as for any connection the server ends. SCRAM logins (``auth_scram``) prove an
entry of the same file and are judged the same way; logins by certificate identity, the
HTTP service or anonymous access carry no entry and are left alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker_core.auth import AuthRequest, AuthResult
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.passwords import PasswordFile, verify_password

if TYPE_CHECKING:
    from broker_core.sessions import SessionRegistry

__all__ = ["PasswordFileProvider", "disconnect_revoked"]

log = logging.getLogger(__name__)

#: The reason string of the DISCONNECT (MQTT 5).
REVOKED = "credentials changed or removed from the password file"


class PasswordFileProvider:
    def __init__(self, passwords: PasswordFile) -> None:
        self.passwords = passwords

    async def check(self, request: AuthRequest) -> AuthResult | None:
        username = request.username
        if username is None:
            return None
        stored = self.passwords.lookup(username)
        if stored is None:
            return None
        password = request.password
        if password is None:
            return AuthResult.refuse(ReasonCode.BAD_USER_NAME_OR_PASSWORD)
        if not await asyncio.to_thread(verify_password, password, stored):
            return AuthResult.refuse(ReasonCode.BAD_USER_NAME_OR_PASSWORD)
        return AuthResult(True, username=username, credential=stored)


def disconnect_revoked(sessions: SessionRegistry, passwords: PasswordFile) -> int:
    """Disconnects every connected client that logged in with an entry of ``passwords``
    that its users, as read last, no longer hold: the user is gone or its hash differs.
    Returns how many were disconnected. 0x87 rather than 0x98 Administrative action
    (the API's kick): the connection ends because its credentials no longer authorize
    it, as a refused re-authentication ends one (``auth_exchange``), and a reconnect
    with them would be refused."""
    users = passwords.users()
    count = 0
    for state in sessions:
        session = state.connection
        if session is None or session.closed:
            continue
        proved = session.credential
        if proved is None:
            continue
        username = session.origin.username
        current = None if username is None else users.get(username)
        if current is proved or (current is not None and current == proved):
            continue
        log.debug(
            "client %s (user %s) disconnected: its password file entry was %s",
            state.client_id,
            username,
            "removed" if current is None else "changed",
            extra={"client_id": state.client_id},
        )
        session.disconnect(ReasonCode.NOT_AUTHORIZED, REVOKED)
        count += 1
    return count
