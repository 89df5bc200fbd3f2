"""The session registry: one ``SessionState`` per client id, its takeover and expiry.

A session outlives its connection for its Session Expiry Interval (MQTT 5.0 3.1.2.11;
3.1.1 persistent sessions never expire on their own, here they are capped by
``max_session_expiry``). Expiry is a timer started when the connection ends and
cancelled when the client comes back.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterator

from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.session_state import NEVER_EXPIRES, Counters, SessionState

__all__ = ["SessionRegistry"]


class SessionRegistry:
    def __init__(self, limits: ServerLimits, counters: Counters) -> None:
        self.limits = limits
        self.counters = counters
        self._sessions: dict[str, SessionState] = {}
        self._expiry: dict[str, asyncio.TimerHandle] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[SessionState]:
        return iter(list(self._sessions.values()))

    def get(self, client_id: str) -> SessionState | None:
        return self._sessions.get(client_id)

    def create(self, client_id: str) -> SessionState:
        state = SessionState(client_id, self.limits, self.counters)
        self._sessions[client_id] = state
        return state

    def remove(self, state: SessionState) -> None:
        self.cancel_expiry(state)
        if self._sessions.get(state.client_id) is state:
            del self._sessions[state.client_id]

    def assign_client_id(self) -> str:
        """A fresh client id for a client that sent none (MQTT 5.0 3.1.3.1)."""
        while True:
            client_id = f"edgebus-{secrets.token_hex(8)}"
            if client_id not in self._sessions:
                return client_id

    def schedule_expiry(
        self,
        state: SessionState,
        on_expire: Callable[[SessionState], None],
        delay_s: float | None = None,
    ) -> None:
        """Starts the expiry timer of a session whose client went offline."""
        self.cancel_expiry(state)
        if state.expiry_interval == NEVER_EXPIRES:
            return
        loop = asyncio.get_running_loop()
        delay = state.expiry_interval if delay_s is None else delay_s
        self._expiry[state.client_id] = loop.call_later(delay, on_expire, state)

    def cancel_expiry(self, state: SessionState) -> None:
        handle = self._expiry.pop(state.client_id, None)
        if handle is not None:
            handle.cancel()

    def online_count(self) -> int:
        return sum(1 for s in self._sessions.values() if s.connection is not None)
