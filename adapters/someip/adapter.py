"""The SOME/IP adapter: services of ECUs to MQTT and back, through someipy's daemon.

The only module that imports someipy (its daemon, in its own process, is run by
``adapters/someip/daemon.py``). someipy's apps never touch the network: they talk to a
daemon, ``someipyd``, over a Unix socket. The adapter connects to one
(``daemon.socket_path``) or starts and watches its own (``process.py``), then:

- **consume**: it subscribes the eventgroups of each consumed service and publishes
  each event (``messages.EventRoute``); MQTT 5 requests on a method's topic become
  calls, answered on the response topic (``CallRoute``). The n-th consumed instance of
  each service id uses daemon connection n: someipy's client library tells the events
  of two instances of one service apart by nothing else.
- **offer**: offered services share one connection; their events are fed from MQTT
  topics (``FeedRoute``), method calls become MQTT 5 requests to a responder
  (``AnswerRoute``).
- **availability**: a socket joined to the service discovery multicast group hears
  offers and stop-offers (the daemon keeps them to itself); ``availability.py`` turns
  them into ``offered`` / ``stopped`` / ``expired``, published retained. The adapter is
  ``running`` while every configured service is offered, ``degraded`` otherwise.

someipy's client library runs on the event loop (asyncio streams): its callbacks arrive
on the loop, so no thread inbox is needed. Its send queue to the daemon is unbounded:
sending offered events waits while more than ``max_send_backlog`` messages are queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from someipy import (
    ClientServiceInstance,
    Event,
    EventGroup,
    MessageType,
    Method,
    MethodResult,
    ReturnCode,
    ServerServiceInstance,
    ServiceBuilder,
    TransportLayerProtocol,
    connect_to_someipy_daemon,
)
from someipy._internal._sd.deserialization.sd_deserialization import (
    deserialize_sd_message,
    is_sd_message,
)
from someipy._internal._sd.entries.sd_entry import SdEntryType
from someipy.someipy_logging import set_someipy_log_level

from adapters.failures import Unexpected
from adapters.someip.availability import (
    INCOMPATIBLE,
    OFFERED,
    STOPPED,
    UNKNOWN,
    Availability,
    Status,
    Watched,
)
from adapters.someip.config import (
    ConsumedService,
    OfferedService,
    SomeipAdapterConfig,
    eventgroup_of,
)
from adapters.someip.messages import (
    E_NOT_OK,
    AnswerRoute,
    CallRoute,
    EventRoute,
    FeedRoute,
    status_context,
)
from adapters.someip.methods import MethodCalls
from adapters.someip.network import discovery_socket, free_port
from adapters.someip.process import DaemonProcess
from broker_core.errors import AdapterConnectionError
from broker_core.lograte import RateLimitedLog
from gateway.components import Host
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError, TopicTemplate

__all__ = ["SomeipAdapter"]

log = logging.getLogger(__name__)
_PROTOCOLS = {"udp": TransportLayerProtocol.UDP, "tcp": TransportLayerProtocol.TCP}
_NO_SUBSCRIBERS = 0x10
_STOP_WAIT_S = 1.0
_COUNTERS = (
    "events_received",  # consumed events published to MQTT
    "events_malformed",  # consumed events that did not fit their layout
    "events_sent",  # offered events sent from MQTT
    "feeds_malformed",  # MQTT messages that did not fit an offered event's layout
    "calls",  # MQTT requests that called a consumed method
    "call_errors",  # ... answered with an error return code
    "call_timeouts",  # ... answered with E_TIMEOUT
    "requests_malformed",  # requests (either way) that did not fit their layout
    "calls_refused",  # calls refused past max_pending_calls (either way)
    "requests",  # SOME/IP requests to offered methods
    "answers",  # ... answered by an MQTT responder
    "answer_timeouts",  # ... not answered in time (E_NOT_OK)
    "answers_missing",  # ... with no responder subscribed (E_NOT_READY)
    "answers_malformed",  # responses that did not fit the response layout
    "answers_unmatched",  # responses matching no pending request
    "sd_messages",  # service discovery messages heard
    "sd_malformed",  # ... that someipy could not read
    "services_offered",  # availability changes
    "services_stopped",
    "services_expired",
)


class _Muted(logging.StreamHandler):
    """someipy adds a stdout handler at DEBUG to its loggers unless they have a stream
    handler: this one, which writes nothing, lets its records reach the gateway's log
    configuration instead."""

    def emit(self, record: logging.LogRecord) -> None:
        return


def _quiet_someipy() -> None:
    set_someipy_log_level(logging.WARNING)
    for name in (
        "someipyd_client",
        "client_service_instance",
        "server_service_instance",
        "tcp_connection",
    ):
        logger = logging.getLogger(f"someipy.{name}")
        if not any(isinstance(h, logging.StreamHandler) for h in logger.handlers):
            logger.addHandler(_Muted())


class _Link:
    """One connection to the daemon (someipy's ``SomeIpDaemonClient``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    async def open(cls, socket_path: str) -> _Link:
        try:
            client = await connect_to_someipy_daemon({"socket_path": socket_path})
        except Exception as exc:  # someipy raises a bare Exception when it gives up
            raise AdapterConnectionError(
                f"cannot connect to someipyd at {socket_path}: {exc}"
            ) from exc
        return cls(client)

    async def closed(self) -> None:
        """Returns when the daemon closed the connection (the library's reader ended)."""
        reader = self.client._rx_task
        if reader is not None:
            await asyncio.wait({reader})

    async def drain(self, limit: int) -> None:
        """Waits while more than ``limit`` messages wait in the library's send queue."""
        queue: asyncio.Queue[bytes] = self.client._tx_queue
        if queue.qsize() >= limit:
            await queue.join()

    async def close(self) -> None:
        """Sends what is queued (for up to 0.5 s), stops the reader (so that the close
        is not reported as an error), closes."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.client._wait_until_tx_queue_empty(), 0.5)
        reader = self.client._rx_task
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        await self.client._disconnected_from_daemon()


def _eventgroups(service: ConsumedService | OfferedService) -> list[Any]:
    """someipy's eventgroups of a service, with their events."""
    by_group: dict[int, list[Any]] = defaultdict(list)
    for event in service.event_list():
        protocol = _PROTOCOLS[event.protocol]
        by_group[eventgroup_of(service, event)].append(Event(id=event.id, protocol=protocol))
    return [EventGroup(id=group, events=by_group[group]) for group in service.eventgroups]


def _return_code(code: int) -> Any:
    try:
        return ReturnCode(code)
    except ValueError:
        return ReturnCode.E_NOT_OK


class SomeipAdapter:
    def __init__(self, config: SomeipAdapterConfig) -> None:
        self.config = config
        named = config.layouts
        self.consumed = [
            (
                service,
                {e.id: EventRoute(service, e, named) for e in service.event_list()},
                {(r := CallRoute(service, m, named)).topic: r for m in service.method_list()},
            )
            for service in config.consume
        ]
        self.offered = [
            (
                service,
                [FeedRoute(service, e, named) for e in service.event_list()],
                [AnswerRoute(service, m, named) for m in service.method_list()],
            )
            for service in config.offer
        ]
        services: list[ConsumedService | OfferedService] = [*config.consume, *config.offer]
        watched = [
            Watched(s.service_id, s.instance_id, s.major_version, s.minor_version) for s in services
        ]
        self.availability = Availability(watched)
        self.status_template = (
            TopicTemplate(config.status_topic) if config.status_topic is not None else None
        )
        self.counts: dict[str, int] = dict.fromkeys(_COUNTERS, 0)
        self._hub: HubClient | None = None
        self._host: Host | None = None
        self._servers: list[tuple[OfferedService, Any]] = []
        self._methods: MethodCalls | None = None
        self._changed = asyncio.Event()
        self._warn = RateLimitedLog(log)
        self._unexpected = Unexpected(log)

    # -- lifecycle ---------------------------------------------------------------------

    async def run(self, hub: HubClient, host: Host) -> None:
        self._hub, self._host = hub, host
        self._methods = MethodCalls(self.config, hub, self.counts, self._warn, self._failed)
        _quiet_someipy()
        for status in self.availability.statuses():
            self._publish_status(status)
        daemon: DaemonProcess | None = None
        links: list[_Link] = []
        sd_transport: asyncio.DatagramTransport | None = None
        try:
            socket_path = self.config.daemon.socket_path
            if socket_path is None:
                daemon = DaemonProcess(self.config.daemon, host.data_dir)
                await daemon.start()
                socket_path = daemon.socket_path
            sd_transport = await self._listen_sd()
            try:
                async with asyncio.TaskGroup() as tg:
                    await self._start(tg, str(socket_path), links, daemon)
            except BaseExceptionGroup as group:
                raise await _failure(group, daemon) from None
        finally:
            if sd_transport is not None:
                sd_transport.close()
            for link in links:
                with contextlib.suppress(Exception):
                    await link.close()
            if daemon is not None:
                await daemon.close()
            self._methods.close()
            self._servers.clear()

    async def _start(
        self,
        tg: asyncio.TaskGroup,
        socket_path: str,
        links: list[_Link],
        daemon: DaemonProcess | None,
    ) -> None:
        """Connects, subscribes and offers; the tasks serving them run in ``tg``.

        Connections to the daemon: someipy's client library hands an event to every
        client instance of its service id on the connection, whatever the instance, so
        two instances of one service need two connections: the n-th consumed instance
        of each service id uses connection n. Offered services share one."""
        assert self._hub is not None and self._methods is not None
        opened: dict[object, _Link] = {}

        async def link_for(slot: object) -> _Link:
            if slot not in opened:
                link = opened[slot] = await _Link.open(socket_path)
                links.append(link)
                tg.create_task(self._watch_link(link))
            return opened[slot]

        instances: dict[int, int] = defaultdict(int)
        for service, events, calls in self.consumed:
            link = await link_for(instances[service.service_id])
            instances[service.service_id] += 1
            client = self._consume(link, service, events)
            if calls:
                not_offered = functools.partial(
                    self._not_offered, service.service_id, service.instance_id
                )
                tg.create_task(self._methods.serve(tg, client, calls, not_offered))
        for offered, feeds, answers in self.offered:
            link = await link_for("offer")
            server = await self._offer(link, offered, answers)
            self._servers.append((offered, server))
            if feeds:
                tg.create_task(self._feed(link, offered, server, feeds))
        if any(answers for _, _, answers in self.offered):
            responses = self._hub.subscribe(self.config.responses, qos=1)
            tg.create_task(self._methods.collect(responses))
        if daemon is not None:
            tg.create_task(self._watch_daemon(daemon))
        tg.create_task(self._expire())
        self._report_health()

    async def stop(self) -> None:
        """Stops the offers (stop-offer entries go out, seen on the wire for up to 1 s)
        and publishes the last statuses: ``stopped`` for offered services, ``unknown``
        for consumed ones (no longer watched)."""
        for _, server in self._servers:
            with contextlib.suppress(Exception):
                await server.stop_offer()
        deadline = time.monotonic() + _STOP_WAIT_S
        offered = [(s.service_id, s.instance_id) for s, _ in self._servers]
        while any(self.availability.status(*key).state == OFFERED for key in offered):
            self._changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
        offered_keys = set(offered) | {(s.service_id, s.instance_id) for s in self.config.offer}
        for status in self.availability.statuses():
            state = STOPPED if status.key in offered_keys else UNKNOWN
            if status.state != state:
                self._publish_status(replace(status, state=state, endpoint=None, ttl_s=None))

    def stats(self) -> dict[str, int]:
        methods = self._methods
        pending = (methods.calls_pending, len(methods.answers)) if methods else (0, 0)
        return {**self.counts, "calls_pending": pending[0], "answers_pending": pending[1]}

    async def _watch_link(self, link: _Link) -> None:
        await link.closed()
        raise AdapterConnectionError("someipyd closed the connection")

    async def _watch_daemon(self, daemon: DaemonProcess) -> None:
        code = await daemon.wait()
        raise AdapterConnectionError(f"someipyd exited with code {code}: {daemon.log_tail()}")

    # -- availability ------------------------------------------------------------------

    async def _listen_sd(self) -> asyncio.DatagramTransport:
        sock = discovery_socket(self.config.daemon)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Datagrams(self._on_sd), sock=sock
        )
        return transport

    def _on_sd(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            self._on_sd_message(data, addr)
        except Exception as exc:  # a bug: the datagram endpoint would close for good
            self._failed("sd_malformed", exc, "a discovery message from %s; ignored", addr)

    def _failed(self, counter: str, exc: Exception, what: str, *args: object) -> None:
        """Counts in ``counter`` a message whose handling failed unexpectedly and logs it
        at a bounded rate (``Unexpected``; ``what % args`` names the message and what
        became of it): the adapter goes on."""
        self.counts[counter] += 1
        self._unexpected(exc, "someip %s: failed unexpectedly: " + what, self.config.name, *args)

    def _on_sd_message(self, data: bytes, addr: tuple[str, int]) -> None:
        if not is_sd_message(data):
            return
        self.counts["sd_messages"] += 1
        try:
            message = deserialize_sd_message(data, addr[0], addr[1], True)
        except (ValueError, IndexError, KeyError, TypeError, struct.error) as exc:
            self.counts["sd_malformed"] += 1
            self._warn.warning(
                time.monotonic(),
                "someip %s: a malformed service discovery message from %s: %s",
                self.config.name,
                addr,
                exc,
            )
            return
        now = time.monotonic()
        for entry in message.entries:
            if entry.type == SdEntryType.OFFER_SERVICE:
                endpoint = None
                if entry.ip_v4_endpoints:
                    option = entry.ip_v4_endpoints[0]
                    endpoint = f"{option.address}:{option.port}"
                change = self.availability.offered(
                    entry.service_id,
                    entry.instance_id,
                    entry.major_version,
                    entry.minor_version,
                    entry.ttl,
                    endpoint,
                    now,
                )
            elif entry.type == SdEntryType.STOP_OFFER_SERVICE:
                change = self.availability.stopped(
                    entry.service_id,
                    entry.instance_id,
                    now,
                    entry.major_version,
                    entry.minor_version,
                )
            else:
                continue
            if change is not None:
                self._on_change(change)
        self._changed.set()

    async def _expire(self) -> None:
        while True:
            deadline = self.availability.next_deadline()
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()
            self._changed.clear()
            for change in self.availability.expire(time.monotonic()):
                self._on_change(change)

    def _on_change(self, status: Status) -> None:
        if status.state == INCOMPATIBLE:
            log.warning(
                "someip %s: service 0x%04x instance 0x%04x is offered at %s with major version"
                " %s, minor %s, but %s is configured: not used",
                self.config.name,
                status.service_id,
                status.instance_id,
                status.endpoint,
                status.major_version,
                status.minor_version,
                self.availability.watched(status.service_id, status.instance_id).version(),
            )
        else:
            log.info(
                "someip %s: service 0x%04x instance 0x%04x %s%s",
                self.config.name,
                status.service_id,
                status.instance_id,
                status.state,
                f" at {status.endpoint}" if status.state == OFFERED and status.endpoint else "",
            )
        key = f"services_{status.state}"
        if key in self.counts:
            self.counts[key] += 1
        self._publish_status(status)
        self._report_health()

    def _publish_status(self, status: Status) -> None:
        if self.status_template is None or self._hub is None:
            return
        try:
            self._hub.publish(
                status_context(self.status_template, status, self._hub.origin, time.time())
            )
        except MappingError as exc:
            log.warning("someip %s: status topic: %s", self.config.name, exc)

    def _report_health(self) -> None:
        if self._host is None:
            return
        missing = self.availability.unavailable()
        if not missing:
            self._host.ready()
            return
        shown = ", ".join(self._unavailable(s) for s in missing[:4])
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        self._host.degraded(f"services not offered: {shown}{more}")

    def _not_offered(self, service_id: int, instance_id: int) -> str | None:
        """Why a consumed service is not offered (the detail of an E_NOT_REACHABLE); None
        while it is."""
        status = self.availability.status(service_id, instance_id)
        return None if status.state == OFFERED else f"service {self._unavailable(status)}"

    def _unavailable(self, status: Status) -> str:
        """A service instance that is not offered and why, as the degraded reason and
        the detail of an E_NOT_REACHABLE name it."""
        text = f"0x{status.service_id:04x}/0x{status.instance_id:04x} {status.state}"
        if status.state == INCOMPATIBLE:
            wanted = self.availability.watched(status.service_id, status.instance_id).version()
            text += (
                f" (offered with major version {status.major_version}, minor"
                f" {status.minor_version}; configured {wanted})"
            )
        return text

    # -- consume -----------------------------------------------------------------------

    def _consume(self, link: _Link, service: ConsumedService, events: dict[int, EventRoute]) -> Any:
        """A someipy client of ``service`` on ``link``, subscribed to its eventgroups."""
        builder = (
            ServiceBuilder()
            .with_service_id(service.service_id)
            .with_major_version(service.major_version)
            .with_minor_version(
                0xFFFF_FFFF if service.minor_version is None else service.minor_version
            )
        )
        for method in service.method_list():
            builder.with_method(Method(method.id, _PROTOCOLS[method.protocol]))
        groups = _eventgroups(service)
        for group in groups:
            builder.with_eventgroup(group)
        interface = self.config.daemon.interface
        port = service.endpoint_port or free_port(interface, tcp=False)
        client = ClientServiceInstance(
            link.client, builder.build(), service.instance_id, interface, port
        )
        client.register_callback(self._event_handler(service, events))
        for group in groups:
            client.subscribe_eventgroup(group, int(service.subscription_ttl))
        log.info(
            "someip %s: consuming service 0x%04x instance 0x%04x (endpoint %s:%d)",
            self.config.name,
            service.service_id,
            service.instance_id,
            interface,
            port,
        )
        return client

    def _event_handler(
        self, service: ConsumedService, events: dict[int, EventRoute]
    ) -> Callable[[int, bytes], None]:
        hub = self._hub
        assert hub is not None
        origin = hub.origin
        counts = self.counts

        def on_event(event_id: int, payload: bytes) -> None:
            route = events.get(event_id)
            if route is None:
                return
            try:
                hub.publish(route.context(payload, origin))
            except MappingError as exc:
                counts["events_malformed"] += 1
                self._warn.warning(
                    time.monotonic(),
                    "someip %s: event 0x%04x of service 0x%04x instance 0x%04x does not fit: %s",
                    self.config.name,
                    event_id,
                    service.service_id,
                    service.instance_id,
                    exc,
                )
                return
            except Exception as exc:  # a bug: this event is lost, the adapter goes on
                what = "event 0x%04x of service 0x%04x; dropped"
                self._failed("events_malformed", exc, what, event_id, service.service_id)
                return
            counts["events_received"] += 1

        return on_event

    # -- offer -------------------------------------------------------------------------

    async def _offer(self, link: _Link, service: OfferedService, answers: list[AnswerRoute]) -> Any:
        builder = (
            ServiceBuilder()
            .with_service_id(service.service_id)
            .with_major_version(service.major_version)
            .with_minor_version(service.minor_version)
        )
        for route in answers:
            builder.with_method(
                Method(route.method_id, _PROTOCOLS[route.protocol], self._method_handler(route))
            )
        for group in _eventgroups(service):
            builder.with_eventgroup(group)
        interface = self.config.daemon.interface
        tcp = any(m.protocol == "tcp" for m in service.method_list()) or any(
            e.protocol == "tcp" for e in service.event_list()
        )
        port = service.endpoint_port or free_port(interface, tcp)
        server = ServerServiceInstance(
            link.client,
            builder.build(),
            service.instance_id,
            interface,
            port,
            ttl=int(service.ttl),
            cyclic_offer_delay_ms=round(service.cyclic_offer_delay * 1000),
        )
        await server.start_offer()
        log.info(
            "someip %s: offering service 0x%04x instance 0x%04x on %s:%d",
            self.config.name,
            service.service_id,
            service.instance_id,
            interface,
            port,
        )
        return server

    async def _feed(
        self, link: _Link, service: OfferedService, server: Any, feeds: list[FeedRoute]
    ) -> None:
        assert self._hub is not None
        by_topic: dict[str, list[FeedRoute]] = defaultdict(list)
        for route in feeds:
            by_topic[route.topic].append(route)
        subscription: HubSubscription = self._hub.subscribe(
            *by_topic, qos=service.qos, maxsize=self.config.queue_size, retained=False
        )
        limit = self.config.max_send_backlog
        async for context in subscription:
            for route in by_topic.get(context.topic, ()):
                try:
                    payload = route.payload_of(context)
                    await link.drain(limit)
                    server.send_event(route.eventgroup_id, route.event_id, payload)
                except MappingError as exc:
                    self.counts["feeds_malformed"] += 1
                    self._warn.warning(
                        time.monotonic(),
                        "someip %s: %s does not fit event 0x%04x of service 0x%04x: %s",
                        self.config.name,
                        context.topic,
                        route.event_id,
                        service.service_id,
                        exc,
                    )
                    continue
                except Exception as exc:  # a bug: this message is lost, the adapter goes on
                    what = "%s to event 0x%04x of service 0x%04x; dropped"
                    ids = (route.event_id, service.service_id)
                    self._failed("feeds_malformed", exc, what, context.topic, *ids)
                    continue
                self.counts["events_sent"] += 1

    def _method_handler(self, route: AnswerRoute) -> Callable[[bytes, tuple[str, int]], Any]:
        async def handle(payload: bytes, addr: tuple[str, int]) -> MethodResult:
            try:
                assert self._methods is not None
                code, data = await self._methods.answer(route, payload, addr)
            except Exception as exc:  # a bug: the caller gets E_NOT_OK, the adapter goes on
                what = "a request to method 0x%04x; answered E_NOT_OK"
                self._failed("requests_malformed", exc, what, route.method_id)
                code, data = E_NOT_OK, b""
            result = MethodResult()
            result.message_type = MessageType.RESPONSE if code == 0 else MessageType.ERROR
            result.return_code = _return_code(code)
            result.payload = data
            return result

        return handle


async def _failure(group: BaseExceptionGroup, daemon: DaemonProcess | None) -> BaseException:
    """The error a failed run reports: the first of ``group``; when the connection to
    the own daemon broke because the daemon died, that."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    if daemon is not None and isinstance(error, AdapterConnectionError):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                code = await daemon.wait()
                return AdapterConnectionError(
                    f"someipyd exited with code {code}: {daemon.log_tail()}"
                )
    return error


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, callback: Callable[[bytes, tuple[str, int]], None]) -> None:
        self.callback = callback

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.callback(data, addr)
