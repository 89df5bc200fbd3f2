"""``Supervisor``: runs every component instance, of every kind, the same way.

Each instance runs in its own task in the gateway's TaskGroup, with one ``HubClient``
(identity ``<protocol>:<name>``) and one ``Host`` that outlive its restarts. When it
fails (raises, or returns while it should run) the supervisor records the error, waits
(``restart_backoff``, doubling up to ``restart_backoff_max``, with ±10 % jitter; the
wait starts over once an instance has run for a minute) and starts a new one. A failing
instance never stops the broker or the others.

Operations, for configuration reloads and the API: ``add``, ``update`` (restart with a
new config), ``remove``, ``pause``, ``resume``, ``restart``; ``shutdown`` at the end.
Stopping an instance sets ``host.stopping``, awaits its optional ``stop()`` for at most
``stop_timeout_s`` (drain and flush), then cancels it. What a run hands over to the next
(``Host.keep``) waits across a restart, an update and the backoff after a failure; it
is closed when the instance is paused, removed, disabled or unavailable, or the gateway
stops. So are its hub client's subscriptions (``HubClient.park``): they stay subscribed
while the runs swap, the next run takes over those it subscribes to again, and the
others close, what they held counted as dropped, once it is up (``ready()``) or when
no run follows. A restart on request, by ``update`` (a reload) or after a failure
counts in ``restarts``.

States: ``starting``, ``running`` (it called ``ready()``), ``degraded`` (``degraded(
reason)``), ``backing_off``, ``stopping``, ``paused``, ``stopped`` (disabled, or the
gateway is stopping), ``unavailable`` (its native library is not installed, or its
type is not registered; only a restart retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from broker_core.errors import AdapterConnectionError, AdapterUnavailable, BridgeError
from gateway.components import registry
from gateway.components.component import ADAPTER, Spec
from gateway.components.host import (
    BACKING_OFF,
    DEGRADED,
    PAUSED,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
    UNAVAILABLE,
    ComponentStatus,
    Host,
)
from gateway.hub import Hub, HubClient


class SysEvents(Protocol):
    """Where components' ``$SYS`` events go (``broker_core.sys_topics.SysTopics``)."""

    def component_event(self, kind: str, name: str, what: str, body: dict[str, object]) -> None: ...


__all__ = ["STABLE_AFTER_S", "KindView", "Supervisor"]

log = logging.getLogger(__name__)

STABLE_AFTER_S = 60.0

#: States of an instance in a run (``_run_once``), and of one waiting for a request.
_RUNS = frozenset({STARTING, RUNNING, DEGRADED})
_WAITS = frozenset({BACKING_OFF, PAUSED, UNAVAILABLE})


class _Instance:
    def __init__(self, spec: Spec, client: HubClient, host: Host) -> None:
        self.spec = spec
        self.status = host.status
        self.client = client
        self.host = host
        self.component: Any = None
        self.task: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()  # any request: restart, pause, resume, retire
        self.entered = asyncio.Event()  # the first run was launched (or could not be)
        self.paused = False
        self.restart_requested = False
        self.retired = False  # removed, replaced, or the gateway stops
        #: ``remove()``d: for good, not paused, restarted or replaced; its component's
        #: optional ``forget()`` is called once its last run ended
        self.removed = False


class Supervisor:
    def __init__(
        self,
        hub: Hub,
        data_dir: Path,
        specs: Iterable[Spec] = (),
        stop_timeout_s: float = 5.0,
        events: SysEvents | None = None,
    ) -> None:
        self.hub = hub
        self.events = events  # $SYS component events, when the gateway publishes $SYS
        self.data_dir = Path(data_dir)
        self.stop_timeout_s = stop_timeout_s
        self._pending = list(specs)  # until start()
        self._instances: dict[tuple[str, str], _Instance] = {}
        self._retiring: dict[tuple[str, str], asyncio.Task[None]] = {}  # removed, stopping
        self._tg: asyncio.TaskGroup | None = None
        self._shutting_down = False

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._instances) + len(self._pending)

    def specs(self, kind: str | None = None) -> list[Spec]:
        every = [i.spec for i in self._instances.values()] + self._pending
        return [spec for spec in every if kind is None or spec.kind == kind]

    def statuses(self, kind: str | None = None) -> list[dict[str, Any]]:
        """One dict per instance: ``kind``, ``type``, ``name``, ``protocol``, ``state``, ``reason``,
        ``last_error``, ``restarts``, ``since``, ``next_attempt_in_s``, ``stats`` (hub and
        inbox counters, the same for every kind) and ``component_stats`` (its own)."""
        return [
            self._status_of(instance)
            for (k, _), instance in self._instances.items()
            if kind is None or k == kind
        ]

    def status(self, kind: str, name: str) -> dict[str, Any] | None:
        instance = self._instances.get((kind, name))
        return None if instance is None else self._status_of(instance)

    def instance(self, kind: str, name: str) -> Any:
        """The running component object, or None."""
        instance = self._instances.get((kind, name))
        return None if instance is None else instance.component

    def view(self, kind: str) -> KindView:
        return KindView(self, kind)

    @staticmethod
    def _status_of(instance: _Instance) -> dict[str, Any]:
        status = instance.status.as_dict()
        status["protocol"] = instance.client.origin.protocol
        status["stats"] = {**instance.client.stats(), **instance.host.stats()}
        own: dict[str, Any] = {}
        stats = getattr(instance.component, "stats", None)
        if callable(stats):
            try:
                own = {str(k): v for k, v in stats().items()}
            except Exception:
                log.exception("%s %s: stats() failed", instance.spec.kind, instance.spec.name)
        status["component_stats"] = own
        return status

    # -- operations --------------------------------------------------------------------------

    def start(self, tg: asyncio.TaskGroup) -> None:
        """Starts every enabled instance given so far; later ones start when added."""
        self._tg = tg
        pending, self._pending = self._pending, []
        self._forget_absent(pending)
        for spec in pending:
            self.add(spec)

    async def settle(self, timeout_s: float = 10.0) -> None:
        """Returns once every instance started so far has entered its first ``run()``
        and run it up to its first ``await`` (or failed to start), at most after
        ``timeout_s``. The gateway calls it before it opens its listeners: what a
        component sets up before its first ``await`` (a durable tap) is in place before
        the first message is accepted."""
        waiting = [
            instance.entered.wait()
            for instance in self._instances.values()
            if instance.task is not None
        ]
        if waiting:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.gather(*waiting)
        await asyncio.sleep(0)  # the run() tasks just created take their first step first

    def add(self, spec: Spec) -> None:
        """Adds an instance (started when enabled); ValueError if the name is taken."""
        key = (spec.kind, spec.name)
        if key in self._instances or any((s.kind, s.name) == key for s in self._pending):
            raise ValueError(f"there is already a {spec.kind} named {spec.name!r}")
        if self._shutting_down:
            raise RuntimeError("the gateway is stopping")
        if self._tg is None:
            self._pending.append(spec)
            return
        self._launch(spec, previous=None)

    def update(self, spec: Spec) -> bool:
        """Restarts an instance with a new config (stopping the old one first); False if
        there is no such instance."""
        old = self._instances.get((spec.kind, spec.name))
        if old is None or self._tg is None:
            return False
        self._retire(old)
        if spec.enabled and old.task is not None and not old.task.done():
            # A restart on request (docs/api.md: restarts "after failures or on request").
            log.info("%s %s restarting with a new configuration", spec.kind, spec.name)
            old.status.restarts += 1
            old.host.restarting = True  # the new config's run follows
        self._launch(spec, previous=old.task)
        return True

    def remove(self, kind: str, name: str) -> bool:
        """Stops an instance (gracefully, in the background) and forgets it."""
        instance = self._instances.pop((kind, name), None)
        if instance is None:
            return False
        instance.removed = True
        self._retire(instance)
        if instance.task is not None and not instance.task.done():
            self._retiring[(kind, name)] = instance.task
        return True

    def restart(self, kind: str, name: str) -> bool:
        """Restarts an instance now: also one backing off, paused or unavailable."""
        instance = self._instances.get((kind, name))
        if instance is None or instance.task is None:
            return False
        instance.paused = False
        instance.restart_requested = True
        instance.host.restarting = True
        self._request(instance, STARTING)
        return True

    def pause(self, kind: str, name: str) -> bool:
        """Stops an instance (gracefully) until ``resume``."""
        instance = self._instances.get((kind, name))
        if instance is None or instance.task is None:
            return False
        instance.paused = True
        instance.host.restarting = False
        self._request(instance, PAUSED)
        return True

    def resume(self, kind: str, name: str) -> bool:
        """Starts a paused instance again; one that is not paused goes on as it is."""
        instance = self._instances.get((kind, name))
        if instance is None or instance.task is None:
            return False
        if instance.paused:
            instance.paused = False
            self._request(instance, STARTING)
        return True

    @staticmethod
    def _request(instance: _Instance, then: str) -> None:
        """Wakes the instance's task for a request, and shows at once the state the
        request leads to, as the task sets it when it takes the request up: a run in
        progress stops first (``stopping`` while it drains); an instance not running
        (backing off, paused, unavailable, not started yet) goes to ``then``."""
        status = instance.status
        task = instance.task
        if status.state in _RUNS:
            status.set(STOPPING)
        elif status.state in _WAITS or (
            status.state == STOPPED and task is not None and not task.done()
        ):
            status.set(then)
            status.next_attempt_in_s = None
        # else stopping: it ends that first; stopped: retired, it will not run again
        instance.wake.set()

    def reconcile(self, specs: Iterable[Spec]) -> list[str]:
        """Applies a new set of instances (a configuration reload): removed ones stop,
        new ones start, changed ones restart, unchanged ones keep running. Returns what
        changed, e.g. ``["adapter: started units", "adapter: restarted echo"]``; one
        with ``enabled: false`` is ``added <name> (disabled)``, ``stopped <name>
        (disabled)`` (it was enabled) or ``changed <name> (disabled)``; one enabled
        again is ``started``."""
        changes: list[str] = []
        wanted = {(spec.kind, spec.name): spec for spec in specs}
        for key in list(self._instances):
            if key not in wanted:
                self.remove(*key)
                changes.append(f"{key[0]}: removed {key[1]}")
        for key, spec in wanted.items():
            instance = self._instances.get(key)
            if instance is not None and instance.spec == spec:
                continue
            if instance is not None:
                was_enabled = instance.spec.enabled
                self.update(spec)
                if spec.enabled:
                    again = "restarted" if was_enabled else "started"
                    changes.append(f"{key[0]}: {again} {key[1]}")
                elif was_enabled:
                    changes.append(f"{key[0]}: stopped {key[1]} (disabled)")
                else:
                    changes.append(f"{key[0]}: changed {key[1]} (disabled)")
            else:
                self.add(spec)
                if spec.enabled:
                    changes.append(f"{key[0]}: started {key[1]}")
                else:
                    changes.append(f"{key[0]}: added {key[1]} (disabled)")
        return changes

    def rejudge(self) -> list[str]:
        """After the ACL changed (a reload): restarts each running instance holding a
        subscription, tap or hook that the ACL now denies, so that it is judged as at
        its start (its next run's subscribing is refused: it backs off with the reason,
        as with that ACL at start). An instance backing off because the ACL denied it
        runs again at its next attempt. Returns what changed, e.g.
        ``["adapter: restarted lb"]``."""
        changes: list[str] = []
        for (kind, name), instance in list(self._instances.items()):
            if instance.status.state not in _RUNS:
                continue
            denied = instance.client.denied_filters()
            if denied:
                log.error(
                    "%s %s: the ACL now denies %s; restarting it",
                    kind,
                    name,
                    ", ".join(map(repr, denied)),
                )
                self.restart(kind, name)
                changes.append(f"{kind}: restarted {name}")
        return changes

    async def shutdown(self) -> None:
        """Stops every instance: each gets ``stop_timeout_s`` to drain, then is cancelled."""
        self._shutting_down = True
        tasks = [task for task in self._retiring.values() if not task.done()]
        for instance in self._instances.values():
            self._retire(instance)
            if instance.task is not None:
                tasks.append(instance.task)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self.stop_timeout_s + 1.0)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)

    # -- internals ---------------------------------------------------------------------------

    def _launch(self, spec: Spec, previous: asyncio.Task[None] | None) -> None:
        assert self._tg is not None
        key = (spec.kind, spec.name)
        retiring = self._retiring.pop(key, None)
        if previous is None and retiring is not None and not retiring.done():
            previous = retiring  # a removed instance of that name is still stopping
        old = self._instances.get(key)
        if old is not None:
            client, host = old.client, old.host
            host.status.kind, host.status.type = spec.kind, spec.type
            host.type = spec.type
        else:
            protocol = self._protocol(spec)
            client = self.hub.client(protocol, spec.name)
            host = Host(
                ComponentStatus(spec.kind, spec.type, spec.name), self.data_dir, self._sys_event
            )
        instance = self._instances[key] = _Instance(spec, client, host)
        if spec.enabled:
            instance.task = self._tg.create_task(
                self._supervise(instance, previous), name=f"{spec.kind}-{spec.name}"
            )
        else:
            instance.status.set(STOPPED)

    def _sys_event(self, kind: str, name: str, what: str, body: dict[str, object]) -> None:
        if self.events is not None:
            self.events.component_event(kind, name, what, body)

    @staticmethod
    def _protocol(spec: Spec) -> str:
        try:
            return registry.lookup(spec.kind, spec.type).origin_protocol
        except KeyError:
            return spec.type if spec.kind == ADAPTER else spec.kind

    @staticmethod
    def _retire(instance: _Instance) -> None:
        instance.retired = True
        instance.host.restarting = False  # update() sets it again: a new run follows
        instance.wake.set()

    async def _supervise(self, instance: _Instance, previous: asyncio.Task[None] | None) -> None:
        spec = instance.spec
        status = instance.status
        if previous is not None:
            await asyncio.wait({previous})  # the replaced instance finishes stopping first
        backoff = spec.restart_backoff_s
        try:
            while not instance.retired:
                if instance.paused:
                    self._release(instance)  # paused: nothing is taken in meanwhile
                    status.set(PAUSED)
                    status.next_attempt_in_s = None
                    await self._next_request(instance)
                    continue
                instance.restart_requested = False
                status.set(STARTING)
                status.next_attempt_in_s = None
                started = time.monotonic()
                try:
                    requested = await self._run_once(instance)
                    error: BaseException = RuntimeError(f"the {spec.kind} stopped by itself")
                except AdapterUnavailable as exc:
                    self._release(instance)
                    status.set(UNAVAILABLE, str(exc))
                    log.error("%s %s unavailable: %s", spec.kind, spec.name, exc)
                    await self._next_request(instance)
                    continue
                except Exception as exc:
                    requested = False
                    error = exc
                if requested:
                    if instance.restart_requested:
                        log.info("%s %s restarting on request", spec.kind, spec.name)
                        status.restarts += 1
                        backoff = spec.restart_backoff_s
                    continue
                if time.monotonic() - started > STABLE_AFTER_S:
                    backoff = spec.restart_backoff_s
                import random  # with a component's first failure: 0.2 MB of idle RSS

                wait_s = backoff * random.uniform(0.9, 1.1)
                status.set(BACKING_OFF, f"{type(error).__name__}: {error}")
                status.next_attempt_in_s = round(wait_s, 3)
                log.warning(
                    "%s %s failed (%s: %s); restarting in %.1fs",
                    spec.kind,
                    spec.name,
                    type(error).__name__,
                    error,
                    wait_s,
                    # A BridgeError says what failed and what to do (a queue file that
                    # cannot be used), an AdapterConnectionError why a bind or connect
                    # failed (address in use, no such directory, permission): one line a
                    # retry, no traceback. Anything else is unforeseen: with its traceback.
                    exc_info=None
                    if isinstance(
                        error, RuntimeError | OSError | BridgeError | AdapterConnectionError
                    )
                    else error,
                )
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._next_request(instance)
                status.restarts += 1
                backoff = min(backoff * 2, spec.restart_backoff_max_s)
        finally:
            status.set(STOPPED)
            status.next_attempt_in_s = None
            successor = self._instances.get((spec.kind, spec.name))
            if (
                successor is None
                or successor is instance
                or successor.host is not instance.host
                or successor.task is None
            ):
                self._release(instance)  # no run of this instance follows
            if instance.removed:
                self._forget(instance)

    def _forget_absent(self, specs: list[Spec]) -> None:
        """Before the first instance starts: each type's ``forget_absent`` (the registry)
        removes what it left in the broker's store for instances no longer configured
        (a bridge's inbound QoS 2 records), given the names of the configured ones."""
        names: dict[str, tuple[registry.ComponentType, list[str]]] = {}
        for entry in registry.TYPES.values():
            if entry.forget_absent is not None:
                names.setdefault(entry.forget_absent, (entry, []))
        for spec in specs:
            found = registry.TYPES.get((spec.kind, spec.type))
            if found is not None and found.forget_absent is not None:
                names[found.forget_absent][1].append(spec.name)
        for path, (entry, configured) in names.items():
            try:
                registry.load_forget_absent(entry)(self.hub, configured)
            except Exception:
                log.exception("%s failed; what it would remove stays in the store", path)

    @staticmethod
    def _forget(instance: _Instance) -> None:
        """A removed instance's last run ended: its component forgets what it kept in
        shared stores (a bridge's inbound QoS 2 records)."""
        forget = getattr(instance.component, "forget", None)
        if not callable(forget):
            return
        try:
            forget()
        except Exception:
            log.exception("%s %s: forget() failed", instance.spec.kind, instance.spec.name)

    @staticmethod
    def _release(instance: _Instance) -> None:
        """No run follows, for now: what the last run kept (``Host.keep``) closes, and so
        do its subscriptions parked for the next run (what they hold counted dropped)."""
        instance.host.release()
        instance.client.release_parked()

    @staticmethod
    async def _next_request(instance: _Instance) -> None:
        await instance.wake.wait()
        instance.wake.clear()

    async def _run_once(self, instance: _Instance) -> bool:
        """One run; True when it ended on request (it was stopped), False when the
        component returned by itself. Raises what the component raised."""
        spec = instance.spec
        try:
            entry = registry.lookup(spec.kind, spec.type)
            cls = registry.load_component(entry)
        except KeyError:
            instance.entered.set()
            raise AdapterUnavailable(f"no {spec.kind} type {spec.type!r} is registered") from None
        except BaseException:
            instance.entered.set()
            raise
        host = instance.host
        # The last run's subscriptions were parked (``HubClient.park``): this run takes
        # over those it subscribes to again; once it is up (``ready()`` or ``degraded()``,
        # and what it started meanwhile has had a turn) the others close, counted.
        host.begin_run(on_up=instance.client.release_parked)
        try:
            component = instance.component = cls(spec.config)
            run = asyncio.ensure_future(component.run(instance.client, host))
        finally:
            instance.entered.set()
        wake = asyncio.ensure_future(instance.wake.wait())
        try:
            done, _ = await asyncio.wait({run, wake}, return_when=asyncio.FIRST_COMPLETED)
            if run in done:
                run.result()
                return False
            instance.wake.clear()
            await self._stop(instance, run)
            return True
        finally:
            wake.cancel()
            if not run.done():
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)
            # A next run (a restart, an update, after a failure) takes the subscriptions
            # over; when none follows, ``_release`` closes them.
            instance.client.park()
            host.end_run()

    async def _stop(self, instance: _Instance, run: asyncio.Future[None]) -> None:
        """Asks a running instance to stop: ``host.stopping``, then its ``stop()`` for at
        most ``stop_timeout_s``; the caller cancels what is still running."""
        spec = instance.spec
        instance.status.set(STOPPING)
        instance.host.stopping.set()
        stop = getattr(instance.component, "stop", None)
        if stop is None:
            return
        try:
            async with asyncio.timeout(self.stop_timeout_s):
                await stop()
        except TimeoutError:
            log.warning(
                "%s %s did not stop within %.1fs; cancelling it",
                spec.kind,
                spec.name,
                self.stop_timeout_s,
            )
        except Exception:
            log.exception("%s %s: stop() failed", spec.kind, spec.name)
        if run.done() and not run.cancelled() and run.exception() is not None:
            log.info("%s %s ended with %r while stopping", spec.kind, spec.name, run.exception())


class KindView:
    """The instances of one kind, as the API's ``gateway.adapters`` / ``gateway.bridges``
    see them (``statuses()``, ``status(name)``, ``instance(name)``, ``restart(name)``)."""

    def __init__(self, supervisor: Supervisor, kind: str) -> None:
        self.supervisor = supervisor
        self.kind = kind

    def __len__(self) -> int:
        return len(self.supervisor.specs(self.kind))

    def statuses(self) -> list[dict[str, Any]]:
        return self.supervisor.statuses(self.kind)

    def status(self, name: str) -> dict[str, Any] | None:
        return self.supervisor.status(self.kind, name)

    def instance(self, name: str) -> Any:
        return self.supervisor.instance(self.kind, name)

    async def restart(self, name: str) -> bool:
        return self.supervisor.restart(self.kind, name)
