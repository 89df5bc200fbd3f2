"""The AUTH packets of MQTT 5 enhanced authentication (MQTT 5.0 sections 3.15, 4.12).

``AuthExchanges`` holds the exchanges in progress, at most one per connection, off the
publish path: a ``Session`` maps to the future its next AUTH packet resolves.

- During CONNECT the broker hands the authenticator a ``SessionExchange``; its
  ``challenge(data)`` sends AUTH 0x18 and waits for the client's AUTH 0x18, at most
  ``timeout_s`` (the connect timeout; the session's own connect deadline closes the
  connection first, which cancels the wait).
- On an established connection, AUTH 0x19 starts re-authentication (4.12.1): the same
  authenticator runs with the new Authentication Data, in a task this object owns.
  Success sends AUTH 0x00 with the method's final data; failure sends DISCONNECT 0x87
  Not authorized (0x86 and 0x8C are not DISCONNECT reason codes). Re-authentication
  must keep the connection's user.

Wrong AUTH packets are protocol errors (0x82): any AUTH while no exchange waits other
than 0x19 on an established connection, a reason code other than 0x18 inside an
exchange (a second 0x19 among them, also one arriving before the first's exchange
waits for its answer, in the same read), or an Authentication Method other than the
CONNECT's [MQTT-4.12.0-5, MQTT-4.12.1-1]. AUTH without an Authentication Method in
CONNECT is refused by the session itself.
"""

from __future__ import annotations

import asyncio
import logging

from broker_core.auth import Authenticator, AuthRequest
from broker_core.errors import ProtocolError, ProtocolViolation
from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.packets import Auth
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session import Session

__all__ = ["AuthExchanges", "SessionExchange"]

log = logging.getLogger(__name__)


class SessionExchange:
    """``AuthExchange`` of one connection: AUTH 0x18 out, the client's AUTH 0x18 back."""

    def __init__(self, registry: AuthExchanges, session: Session, method: str) -> None:
        self._registry = registry
        self.session = session
        self.method = method

    async def challenge(self, data: bytes | None) -> bytes | None:
        session = self.session
        if session.closed:
            raise ProtocolError(
                "connection closed during authentication", ReasonCode.NOT_AUTHORIZED
            )
        waiting = self._registry.waiting
        if session in waiting:
            raise RuntimeError("an authentication exchange is already waiting")
        future: asyncio.Future[Auth] = asyncio.get_running_loop().create_future()
        waiting[session] = future
        try:
            session.auth_continue(self.method, data)
            async with asyncio.timeout(self._registry.timeout_s):
                auth = await future
        except TimeoutError:
            raise ProtocolError("no AUTH answer in time", ReasonCode.NOT_AUTHORIZED) from None
        finally:
            if waiting.get(session) is future:
                del waiting[session]
        if auth.reason_code != ReasonCode.CONTINUE_AUTHENTICATION:
            raise ProtocolViolation(
                f"AUTH reason 0x{auth.reason_code:02X} during an exchange (expected 0x18)"
            )
        if auth.properties.authentication_method != self.method:
            raise ProtocolViolation("AUTH with another authentication method")
        return auth.properties.authentication_data


class AuthExchanges:
    def __init__(self, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self.waiting: dict[Session, asyncio.Future[Auth]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # The connections re-authenticating (a task in ``_tasks``), waiting for an AUTH
        # (``waiting``) or not yet.
        self._reauthenticating: set[Session] = set()

    def exchange(self, session: Session, method: str) -> SessionExchange:
        return SessionExchange(self, session, method)

    def received(
        self,
        session: Session,
        auth: Auth,
        authenticator: Authenticator,
        listener: ListenerSettings,
        certificate_identity: str | None,
    ) -> None:
        """A client's AUTH packet: the next step of an exchange, or re-authentication."""
        future = self.waiting.get(session)
        if future is not None and not future.done():
            future.set_result(auth)
            return
        if session.state is None:
            raise ProtocolViolation("AUTH while no authentication exchange is open")
        if auth.reason_code != ReasonCode.RE_AUTHENTICATE:
            raise ProtocolViolation(f"AUTH reason 0x{auth.reason_code:02X} outside an exchange")
        reauthenticating = self._reauthenticating
        if session in reauthenticating:
            # Its exchange has not reached its wait for an AUTH (the same read brought
            # both): as a 0x19 answering a challenge (``SessionExchange.challenge``).
            raise ProtocolViolation("AUTH 0x19 during a re-authentication")
        connect = session.connect
        assert connect is not None
        method = connect.properties.authentication_method
        if method is None or auth.properties.authentication_method != method:
            raise ProtocolViolation("re-authentication with another method")  # [MQTT-4.12.1-1]
        request = AuthRequest(
            session.origin.name,
            connect.username,
            connect.password,
            session.peer,
            listener,
            session.protocol_level,
            certificate_identity,
            auth_method=method,
            auth_data=auth.properties.authentication_data,
            exchange=self.exchange(session, method),
            reauthentication=True,
        )
        task = asyncio.get_running_loop().create_task(
            self._reauthenticate(authenticator, session, request)
        )
        self._tasks.add(task)
        reauthenticating.add(session)

        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            reauthenticating.discard(session)

        task.add_done_callback(done)

    async def _reauthenticate(
        self, authenticator: Authenticator, session: Session, request: AuthRequest
    ) -> None:
        try:
            result = await authenticator.authenticate(request)
        except ProtocolError as exc:
            log.info(
                "re-authentication of %s failed: %s",
                request.client_id,
                exc,
                extra={"client_id": request.client_id},
            )
            session.disconnect(exc.reason_code)
            return
        except Exception as exc:
            log.error(
                "re-authentication of %s failed",
                request.client_id,
                exc_info=exc,
                extra={"client_id": request.client_id},
            )
            session.disconnect(ReasonCode.UNSPECIFIED_ERROR)
            return
        if session.closed:
            return
        if not result.allowed or result.username != session.origin.username:
            log.info(
                "re-authentication of %s refused (0x%02X)",
                request.client_id,
                result.reason_code,
                extra={"client_id": request.client_id},
            )
            session.disconnect(ReasonCode.NOT_AUTHORIZED)
            return
        assert request.auth_method is not None
        session.credential = result.credential
        session.auth_continue(request.auth_method, result.auth_data, ReasonCode.SUCCESS)

    def cancel(self) -> None:
        """Ends every re-authentication in progress (shutdown)."""
        for task in list(self._tasks):
            task.cancel()
