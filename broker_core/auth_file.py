"""Username and password against the password file (``broker_core.passwords``).

The provider knows the users listed in the file and no one else: for any other
username, or a client without a username, it answers None and the next provider of
the ``AuthChain`` is asked. A known user with a wrong or missing password is refused
with 0x86 Bad user name or password. The slow hash runs in a worker thread, off the
event loop.
"""

from __future__ import annotations

import asyncio

from broker_core.auth import AuthRequest, AuthResult
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.passwords import PasswordFile, verify_password

__all__ = ["PasswordFileProvider"]


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
        return AuthResult(True, username=username)
