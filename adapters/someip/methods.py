"""Method calls both ways between MQTT 5 request/response and SOME/IP (no someipy here:
the adapter hands in someipy's client instances and wraps the answers it returns).

- ``serve(tg, client, calls)``: MQTT requests on a consumed method's topic call it
  (``client.call_method``); the response, an error code or a timeout goes back to the
  request's response topic (``messages.CallRoute``).
- ``answer(route, payload, addr)``: a SOME/IP request to an offered method becomes an
  MQTT request to a responder; ``collect(subscription)`` matches the responses on the
  adapter's response topic by correlation data (``messages.AnswerRoute``).

At most ``max_pending_calls`` calls are in progress each way; past it a call is answered
at once with E_NOT_READY (``calls_refused``). A call to a service that the adapter's
availability says is not offered (unknown, stopped, expired, incompatible) is answered
at once with E_NOT_REACHABLE: someipy's daemon would send it to a stopped service until
that service's TTL runs out, and the call would time out.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from adapters.someip.config import SomeipAdapterConfig
from adapters.someip.messages import (
    E_MALFORMED_MESSAGE,
    E_NOT_OK,
    E_NOT_REACHABLE,
    E_NOT_READY,
    E_TIMEOUT,
    AnswerRoute,
    CallRoute,
)
from broker_core.context import Context
from broker_core.lograte import RateLimitedLog
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError

__all__ = ["MethodCalls"]

log = logging.getLogger(__name__)
_NO_SUBSCRIBERS = 0x10


class MethodCalls:
    def __init__(
        self,
        config: SomeipAdapterConfig,
        hub: HubClient,
        counts: dict[str, int],
        warn: RateLimitedLog,
        failed: Callable[..., None],
    ) -> None:
        self.config = config
        self.hub = hub
        self.counts = counts
        self.warn = warn
        self.failed = failed  # (counter, exc, what, *args): the adapter's _failed
        self.calls_pending = 0  # consumed methods: calls someipy has not finished
        self.answers: dict[bytes, asyncio.Future[Context | None]] = {}  # offered: by correlation

    def close(self) -> None:
        for future in self.answers.values():
            future.cancel()
        self.answers.clear()

    # -- consumed methods: MQTT request -> SOME/IP call ----------------------------------

    async def serve(
        self,
        tg: asyncio.TaskGroup,
        client: Any,
        calls: dict[str, CallRoute],
        not_offered: Callable[[], str | None],
    ) -> None:
        """Serves the MQTT requests to the methods of one consumed service (``client``,
        someipy's ``ClientServiceInstance``); the calls run in ``tg``. ``not_offered()``
        says why the service is not offered now, None while it is."""
        origin = self.hub.origin
        subscription = self.hub.subscribe(
            *calls, qos=1, maxsize=self.config.queue_size, retained=False
        )
        async for request in subscription:
            route = calls.get(request.topic)
            if route is None:
                continue
            unavailable = not_offered()
            if unavailable is not None:
                self.counts["calls"] += 1
                self.counts["call_errors"] += 1
                self._respond(route.error(request, E_NOT_REACHABLE, unavailable, origin))
                continue
            if self.calls_pending >= self.config.max_pending_calls:
                self.counts["calls_refused"] += 1
                self._respond(
                    route.error(request, E_NOT_READY, "too many calls in progress", origin)
                )
                continue
            try:
                payload = route.request_payload(request)
            except MappingError as exc:
                self.counts["requests_malformed"] += 1
                self._respond(route.error(request, E_MALFORMED_MESSAGE, f"request {exc}", origin))
                continue
            except Exception as exc:  # a bug: this request is lost, the adapter goes on
                what = "an MQTT request to method 0x%04x; dropped"
                self.failed("requests_malformed", exc, what, route.method_id)
                continue
            self.calls_pending += 1
            call = tg.create_task(self._invoke(client, route.method_id, payload))
            tg.create_task(self._reply(route, request, call))

    async def _invoke(self, client: Any, method_id: int, payload: bytes) -> tuple[int, bytes, str]:
        """One call through someipy; (return code, payload, detail), never raises.

        Runs to the library's own end (it waits up to 10 s for a response and cleans up
        after itself), even when the MQTT requester was answered with a timeout before:
        cancelling it mid-way would leave someipy's bookkeeping inconsistent."""
        try:
            result = await client.call_method(method_id, payload)
        except TimeoutError:
            return E_TIMEOUT, b"", "no response"
        except RuntimeError as exc:  # someipy: the service is not found
            return E_NOT_REACHABLE, b"", str(exc)
        except Exception as exc:  # someipy raises bare Exceptions on daemon trouble
            log.warning(
                "someip %s: calling method 0x%04x failed: %r", self.config.name, method_id, exc
            )
            return E_NOT_OK, b"", f"the call failed: {exc}"
        finally:
            self.calls_pending -= 1
        return result.return_code.value, result.payload, ""

    async def _reply(
        self, route: CallRoute, request: Context, call: asyncio.Task[tuple[int, bytes, str]]
    ) -> None:
        origin = self.hub.origin
        self.counts["calls"] += 1
        try:
            async with asyncio.timeout(route.timeout_s):
                code, payload, detail = await asyncio.shield(call)
        except TimeoutError:
            code, payload, detail = E_TIMEOUT, b"", ""
        try:
            if code == E_TIMEOUT:
                self.counts["call_timeouts"] += 1
                detail = f"no response within {route.timeout_s:g}s"
                response = route.error(request, E_TIMEOUT, detail, origin)
            elif detail:
                self.counts["call_errors"] += 1
                response = route.error(request, code, detail, origin)
            else:
                if code:
                    self.counts["call_errors"] += 1
                response = route.answer(request, code, payload, origin)
            self._respond(response)
        except Exception as exc:  # a bug: this response is lost, the adapter goes on
            self.failed("call_errors", exc, "the response of method 0x%04x", route.method_id)

    def _respond(self, response: Context | None) -> None:
        if response is not None:
            self.hub.publish(response)

    # -- offered methods: SOME/IP request -> MQTT responder ------------------------------

    async def answer(
        self, route: AnswerRoute, payload: bytes, addr: tuple[str, int]
    ) -> tuple[int, bytes]:
        """A SOME/IP request from ``addr``, answered by an MQTT responder: (return code,
        payload)."""
        hub = self.hub
        self.counts["requests"] += 1
        if len(self.answers) >= self.config.max_pending_calls:
            self.counts["calls_refused"] += 1
            return E_NOT_READY, b""
        correlation = uuid.uuid4().bytes
        try:
            request = route.request_context(payload, correlation, self.config.responses, hub.origin)
        except MappingError as exc:
            self.counts["requests_malformed"] += 1
            self.warn.warning(
                time.monotonic(),
                "someip %s: a request to method 0x%04x from %s:%d does not fit: %s",
                self.config.name,
                route.method_id,
                addr[0],
                addr[1],
                exc,
            )
            return E_MALFORMED_MESSAGE, b""
        future: asyncio.Future[Context | None] = asyncio.get_running_loop().create_future()
        self.answers[correlation] = future

        def published(code: int) -> None:
            if (code >= 0x80 or code == _NO_SUBSCRIBERS) and not future.done():
                future.set_result(None)  # refused, or no responder subscribed

        try:
            hub.publish(request, published)
            async with asyncio.timeout(route.timeout_s):
                response = await future
        except TimeoutError:
            self.counts["answer_timeouts"] += 1
            return E_NOT_OK, b""
        finally:
            self.answers.pop(correlation, None)
        if response is None:
            self.counts["answers_missing"] += 1
            return E_NOT_READY, b""
        try:
            code, data = route.result(response)
        except MappingError as exc:
            self.counts["answers_malformed"] += 1
            self.warn.warning(
                time.monotonic(),
                "someip %s: the response on %s for method 0x%04x does not fit: %s",
                self.config.name,
                response.topic,
                route.method_id,
                exc,
            )
            return E_NOT_OK, b""
        self.counts["answers"] += 1
        return code, data

    async def collect(self, subscription: HubSubscription) -> None:
        """Hands each response on the response topic to the request it answers."""
        async for response in subscription:
            correlation = response.properties.correlation_data
            future = self.answers.get(correlation) if correlation is not None else None
            if future is None or future.done():
                self.counts["answers_unmatched"] += 1
                continue
            future.set_result(response)
