"""Supervising adapters: start, stop, restart with exponential backoff.

Each configured adapter runs in its own task inside the gateway's TaskGroup. When it
fails (raises, or returns while it should be running) the supervisor records the
error, waits (``restart_backoff``, doubling up to ``restart_backoff_max``, with a
little jitter; the wait resets once an adapter has run for a minute) and starts a new
instance. A failing adapter never stops the broker or the other adapters. Each has a
status: ``starting``, ``running``, ``backing_off``, ``stopped`` (disabled, or the
gateway is stopping), or ``unavailable`` (its native library is not installed; not
retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.registry import load_adapter_class
from broker_core.errors import AdapterUnavailable
from gateway.hub import Hub, HubClient

__all__ = ["AdapterStatus", "AdapterSupervisor"]

log = logging.getLogger(__name__)

STARTING = "starting"
RUNNING = "running"
BACKING_OFF = "backing_off"
STOPPED = "stopped"
UNAVAILABLE = "unavailable"
STABLE_AFTER_S = 60.0


@dataclass
class AdapterStatus:
    name: str
    type: str
    state: str = STOPPED
    last_error: str | None = None
    restarts: int = 0
    since: float = field(default_factory=time.time)
    next_attempt_in_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "state": self.state,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "since": self.since,
            "next_attempt_in_s": self.next_attempt_in_s,
        }


class _Supervised:
    def __init__(self, config: Any, hub: Hub) -> None:
        self.config = config
        self.hub = hub
        self.status = AdapterStatus(config.name, config.type)
        self.client: HubClient | None = None
        self.instance: Any = None
        self.task: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()

    def set_state(self, state: str, error: str | None = None) -> None:
        self.status.state = state
        self.status.since = time.time()
        if error is not None:
            self.status.last_error = error


class AdapterSupervisor:
    def __init__(self, hub: Hub, configs: Sequence[Any]) -> None:
        self.hub = hub
        self._adapters = {c.name: _Supervised(c, hub) for c in configs}

    def __len__(self) -> int:
        return len(self._adapters)

    def statuses(self) -> list[dict[str, Any]]:
        out = []
        for supervised in self._adapters.values():
            status = supervised.status.as_dict()
            status["stats"] = supervised.client.stats() if supervised.client else {}
            out.append(status)
        return out

    def status(self, name: str) -> dict[str, Any] | None:
        for status in self.statuses():
            if status["name"] == name:
                return status
        return None

    def instance(self, name: str) -> Any:
        """The running adapter object (for tests and the API), or None."""
        supervised = self._adapters.get(name)
        return None if supervised is None else supervised.instance

    def start(self, tg: asyncio.TaskGroup) -> None:
        for supervised in self._adapters.values():
            if supervised.config.enabled:
                supervised.task = tg.create_task(
                    self._supervise(supervised), name=f"adapter-{supervised.config.name}"
                )

    async def restart(self, name: str) -> bool:
        """Restarts an adapter now (also one that is backing off); False if unknown."""
        supervised = self._adapters.get(name)
        if supervised is None:
            return False
        supervised.wake.set()
        return True

    def stop(self) -> None:
        for supervised in self._adapters.values():
            if supervised.task is not None:
                supervised.task.cancel()

    def reconcile(self, configs: Sequence[Any], tg: asyncio.TaskGroup | None) -> list[str]:
        """Applies a new ``adapters:`` list: stops removed or disabled adapters, starts
        new ones, restarts changed ones; unchanged adapters keep running. Returns what
        changed, e.g. ``["started units", "restarted echo"]``."""
        changes: list[str] = []
        previous = set(self._adapters)
        wanted = {c.name: c for c in configs}
        for name in list(self._adapters):
            if name not in wanted:
                self._stop_one(self._adapters.pop(name))
                changes.append(f"removed {name}")
        for name, config in wanted.items():
            supervised = self._adapters.get(name)
            if supervised is not None and supervised.config == config:
                continue
            if supervised is not None:
                self._stop_one(supervised)
            supervised = self._adapters[name] = _Supervised(config, self.hub)
            if config.enabled and tg is not None:
                supervised.task = tg.create_task(
                    self._supervise(supervised), name=f"adapter-{name}"
                )
            changes.append(f"{'restarted' if name in previous else 'started'} {name}")
        return changes

    @staticmethod
    def _stop_one(supervised: _Supervised) -> None:
        if supervised.task is not None:
            supervised.task.cancel()
        supervised.set_state(STOPPED)

    async def _supervise(self, supervised: _Supervised) -> None:
        config = supervised.config
        backoff = config.restart_backoff
        while True:
            supervised.wake.clear()
            supervised.set_state(STARTING)
            supervised.status.next_attempt_in_s = None
            started = time.monotonic()
            error: BaseException | None = None
            try:
                await self._run_once(supervised)
                error = RuntimeError("the adapter stopped by itself")
            except asyncio.CancelledError:
                supervised.set_state(STOPPED)
                raise
            except AdapterUnavailable as exc:
                supervised.set_state(UNAVAILABLE, str(exc))
                log.error("adapter %s unavailable: %s", config.name, exc)
                await supervised.wake.wait()  # only a manual restart retries
                continue
            except _Restart:
                log.info("adapter %s restarting on request", config.name)
                supervised.status.restarts += 1
                backoff = config.restart_backoff
                continue
            except Exception as exc:
                error = exc
            if time.monotonic() - started > STABLE_AFTER_S:
                backoff = config.restart_backoff
            wait_s = backoff * random.uniform(0.9, 1.1)
            supervised.set_state(BACKING_OFF, f"{type(error).__name__}: {error}")
            supervised.status.next_attempt_in_s = round(wait_s, 3)
            log.warning(
                "adapter %s failed (%s: %s); restarting in %.1fs",
                config.name,
                type(error).__name__,
                error,
                wait_s,
                exc_info=error if not isinstance(error, RuntimeError | OSError) else None,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await supervised.wake.wait()
            supervised.status.restarts += 1
            backoff = min(backoff * 2, config.restart_backoff_max)

    async def _run_once(self, supervised: _Supervised) -> None:
        config = supervised.config
        cls = load_adapter_class(config.type)
        client = self.hub.client(config.type, config.name)
        supervised.client = client
        instance = cls(config)
        supervised.instance = instance

        def ready() -> None:
            supervised.set_state(RUNNING)
            log.info("adapter %s (%s) running", config.name, config.type)

        run = asyncio.ensure_future(instance.run(client, ready))
        wake = asyncio.ensure_future(supervised.wake.wait())
        try:
            done, _ = await asyncio.wait({run, wake}, return_when=asyncio.FIRST_COMPLETED)
            if run in done:
                run.result()
                return
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            raise _Restart
        finally:
            wake.cancel()
            if not run.done():
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)
            client.close()


class _Restart(Exception):
    """A restart was requested through the API."""
