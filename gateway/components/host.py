"""``Host``: what the supervisor gives each component instance besides its hub client.

- ``data_dir``: the instance's own directory, ``<data_dir>/<kind>/<name>``, created on
  first use; it survives restarts of the instance and of the gateway.
- ``ready()``: the native side is up; the status reads ``running``.
- ``degraded(reason)``: running, but impaired (a remote broker unreachable, a peer
  gone); the status reads ``degraded`` with ``reason`` in the API and ``/metrics``
  until ``ready()`` is called again.
- ``inbox(...)``: a bounded, thread-safe ``Inbox`` for libraries that call back on
  their own threads; its depth and drops reach the API and ``/metrics``.
- ``stopping``: an ``asyncio.Event`` set when the supervisor asks the instance to stop
  (shutdown, restart, pause, removal), before its optional ``stop()`` is awaited;
  ``restarting`` is True then when the stop is a restart (on request, or a reload with
  a new config), so that a next run follows.
- ``event(what, body)``: a JSON event on ``$SYS/brokers/<node>/<kind>s/<name>/<what>``
  (when ``sys.events`` is on), e.g. a bridge's ``connected`` and ``disconnected``.
- ``keep(value, close)`` and ``take()``: what one run hands over to the next, across a
  restart (on request, with a new config, or after a failure): a bridge's queue and
  the tap that fills it stay open between its runs, so nothing routed meanwhile
  escapes the queue. When no next run follows (the instance is paused, removed or
  disabled, or the gateway stops) the supervisor calls ``close()`` instead.

``ready`` and ``degraded`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from broker_core.mqtt.limits import DROP_OLDEST
from gateway.components.inbox import Inbox

__all__ = [
    "BACKING_OFF",
    "DEGRADED",
    "PAUSED",
    "RUNNING",
    "STARTING",
    "STOPPED",
    "STOPPING",
    "UNAVAILABLE",
    "ComponentStatus",
    "Host",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

STARTING = "starting"
RUNNING = "running"
DEGRADED = "degraded"
BACKING_OFF = "backing_off"
STOPPING = "stopping"
PAUSED = "paused"
STOPPED = "stopped"
UNAVAILABLE = "unavailable"


@dataclass
class ComponentStatus:
    """What the API and ``/metrics`` show of one instance."""

    kind: str
    type: str
    name: str
    state: str = STOPPED
    reason: str | None = None  # why it is degraded
    last_error: str | None = None  # why it last failed
    restarts: int = 0
    since: float = field(default_factory=time.time)
    next_attempt_in_s: float | None = None

    def set(self, state: str, error: str | None = None) -> None:
        if state != self.state:
            self.since = time.time()
        self.state = state
        if state != DEGRADED:
            self.reason = None
        if error is not None:
            self.last_error = error

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "type": self.type,
            "state": self.state,
            "reason": self.reason,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "since": self.since,
            "next_attempt_in_s": self.next_attempt_in_s,
        }


class Host:
    """One instance's data directory, state reporting, inboxes and stop request."""

    def __init__(
        self,
        status: ComponentStatus,
        data_root: Path,
        events: Callable[[str, str, str, dict[str, object]], None] | None = None,
    ) -> None:
        self.status = status
        self._events = events
        self.kind = status.kind
        self.type = status.type
        self.name = status.name
        self._data_dir = Path(data_root) / status.kind / status.name
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._inboxes: list[Inbox[Any]] = []
        self._carried = {"accepted": 0, "dropped": 0}  # of the inboxes of earlier runs
        self._kept: tuple[Any, Callable[[], None]] | None = None  # for the next run
        self._on_up: Callable[[], None] | None = None  # once, at this run's ready/degraded
        self.stopping = asyncio.Event()
        #: set with ``stopping`` when the stop is a restart (on request, or by a reload
        #: with a new config): a next run follows, to which a run may ``keep`` things
        self.restarting = False

    @property
    def data_dir(self) -> Path:
        """``<data_dir>/<kind>/<name>``, created when first asked for."""
        self._data_dir.mkdir(parents=True, exist_ok=True)
        return self._data_dir

    def ready(self) -> None:
        """The instance is up (again): ``running``, a degraded reason cleared."""
        if threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.ready)
            return
        if self.status.state in (STARTING, RUNNING, DEGRADED):
            if self.status.state != RUNNING:
                log.info("%s %s (%s) running", self.kind, self.name, self.type)
            self.status.set(RUNNING)
            self._up()

    def degraded(self, reason: str) -> None:
        """The instance runs but cannot do its job fully; ``reason`` says why."""
        if threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.degraded, reason)
            return
        if self.status.state in (STARTING, RUNNING, DEGRADED):
            if self.status.reason != reason:
                log.warning("%s %s degraded: %s", self.kind, self.name, reason)
            self.status.set(DEGRADED)
            self.status.reason = reason
            self._up()

    def _up(self) -> None:
        """The run is up: ``on_up`` of ``begin_run``, once, on a later loop turn (tasks
        the run created before it called ``ready()`` take their first step first)."""
        on_up, self._on_up = self._on_up, None
        if on_up is not None:
            self._loop.call_soon(on_up)

    def event(self, what: str, body: dict[str, object]) -> None:
        """Publishes ``body`` as JSON on ``$SYS/brokers/<node>/<kind>s/<name>/<what>``
        (not retained; only with ``sys.events``); call on the event loop."""
        if self._events is not None:
            self._events(self.kind, self.name, what, body)

    def keep(self, value: Any, close: Callable[[], None]) -> None:
        """Hands ``value`` to this instance's next run (``take()``); ``close()`` is called
        instead when no run follows. Call on the event loop, as a run ends."""
        self.release()
        self._kept = (value, close)

    def take(self) -> Any:
        """What the previous run kept for this one (``keep``), or None; it is the
        caller's from now on (its ``close`` will not be called)."""
        kept, self._kept = self._kept, None
        return None if kept is None else kept[0]

    def release(self) -> None:
        """Closes what a run kept (the supervisor: no next run follows, for now)."""
        kept, self._kept = self._kept, None
        if kept is not None:
            try:
                kept[1]()
            except Exception:
                log.exception("%s %s: closing what its last run kept failed", self.kind, self.name)

    def inbox(
        self,
        maxsize: int = 10_000,
        overflow: str = DROP_OLDEST,
        callback: Callable[[T], None] | None = None,
    ) -> Inbox[T]:
        """A new ``Inbox`` (see ``gateway.components.inbox``); call on the event loop.

        It is closed when this run of the instance ends.
        """
        inbox: Inbox[T] = Inbox(maxsize, overflow, callback, f"{self.kind} {self.name} inbox")
        self._inboxes.append(inbox)
        return inbox

    def stats(self) -> dict[str, int]:
        """Depth, accepted and dropped items of the inboxes, earlier runs' included."""
        depth = sum(len(inbox) for inbox in self._inboxes)
        accepted = self._carried["accepted"] + sum(inbox.accepted for inbox in self._inboxes)
        dropped = self._carried["dropped"] + sum(inbox.dropped for inbox in self._inboxes)
        return {"inbox_depth": depth, "inbox_accepted": accepted, "inbox_dropped": dropped}

    def begin_run(self, on_up: Callable[[], None] | None = None) -> None:
        """A new run: a fresh stop request; ``on_up()`` is called (soon, on the loop)
        when the run first calls ``ready()`` or ``degraded()``."""
        self.stopping = asyncio.Event()
        self.restarting = False
        self._on_up = on_up

    def end_run(self) -> None:
        """The run is over: its inboxes close, their counts are kept; items still
        waiting in them (taken in, never consumed) are counted as dropped."""
        self._on_up = None
        for inbox in self._inboxes:
            inbox.close()
            self._carried["accepted"] += inbox.accepted
            self._carried["dropped"] += inbox.dropped + len(inbox)
        self._inboxes.clear()
