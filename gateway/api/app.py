"""``create_app(gateway)``: the FastAPI application of the management API.

Every route needs credentials (``auth``), the OpenAPI description at
``/api/v1/openapi.json`` included; ``/metrics`` too unless ``api.metrics_auth`` is
false. They are checked as soon as a request's head has arrived (``CredentialsFirst``),
before its body is read: a request without them is answered 401 and, unless its body is
small, closed with the body unread. Request bodies are limited (``body_limit``): nothing
larger is read into memory.

Component types may bring routes of their own (the registry's ``api``: a bridge's CRUD,
the stream log's offset ranges); they are mounted under ``/api/v1`` like the others,
behind the same authentication.

A refused body of at most ``DRAIN_LIMIT`` bytes is read and discarded before the 413
goes out, so a client that sends its whole body before it reads (urllib, requests) gets
the answer instead of a reset connection; a larger one, or one sent with ``Expect:
100-continue``, gets the answer at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from broker_core.broker import VERSION
from gateway.api.auth import (
    Credentials,
    authenticate,
    build_credentials,
    caller_of,
    challenge_headers,
)
from gateway.api.components import GatewayView
from gateway.api.connections import ApiConnections, metric_families
from gateway.api.deps import unique_keys
from gateway.api.metrics import new_registry
from gateway.api.routes import (
    admin,
    broker,
    clients,
    components,
    instances,
    metrics,
    publish,
    retained,
    rules,
    subscriptions,
    topics,
)
from gateway.components import registry

__all__ = [
    "DRAIN_LIMIT",
    "PREFIX",
    "UNAUTHENTICATED_DRAIN_LIMIT",
    "BodyLimit",
    "CredentialsFirst",
    "body_limit",
    "component_routers",
    "create_app",
]

log = logging.getLogger(__name__)

PREFIX = "/api/v1"

#: Most bytes of a refused request body read (and discarded) before answering 413.
DRAIN_LIMIT = 8 * 1024 * 1024
#: Longest wait for a refused body to arrive before answering anyway.
DRAIN_TIMEOUT_S = 5.0
#: Most bytes of a request body read (and discarded) before answering 401 for want of
#: credentials: a larger body is left unread and its connection closed.
UNAUTHENTICATED_DRAIN_LIMIT = 64 * 1024

_DESCRIPTION = """\
Management API of an edgebus node: clients, subscriptions, topics, retained messages,
publishing, adapters, bridges, rules, metrics, configuration and reload.

Authenticate with an API key (`Authorization: Bearer <key>` or `X-API-Key: <key>`) or
as a user of `api.users` (HTTP Basic). See docs/api.md.
"""


def body_limit(max_packet_size: int) -> int:
    """Largest request body: one message of the largest size, base64-encoded, and room."""
    return 2 * max_packet_size + 1024 * 1024


class BodyLimit:
    """ASGI middleware refusing request bodies over ``limit`` bytes with 413, by their
    Content-Length or, for chunked ones, as soon as they grow past it (whatever the
    application made of the exception ``receive`` raised then: its answer is replaced)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        for name, value in headers:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                # A client that sent Expect: 100-continue waits for this answer unsent.
                waits = (b"expect", b"100-continue") in ((n, v.lower()) for n, v in headers)
                drain = value.isdigit() and int(value) <= DRAIN_LIMIT and not waits
                await self._refuse(scope, receive, send, drain=drain)
                return
        received = 0
        started = False
        too_large = False
        more_body = True

        async def limited_receive() -> Message:
            nonlocal received, more_body, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                more_body = bool(message.get("more_body"))
                if received > self.limit:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if too_large and not started:
                # FastAPI turns an exception raised while it reads the body into its own
                # 400 ("There was an error parsing the body"): replaced by the 413 below.
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
        if too_large and not started:
            await self._refuse(scope, receive, send, drain=more_body)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, drain: bool) -> None:
        if drain:
            await _drain(receive)
        response = JSONResponse(
            {"detail": f"request body larger than {self.limit} bytes"}, status_code=413
        )
        await response(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


class CredentialsFirst:
    """ASGI middleware answering a request without valid credentials 401 once its head
    has arrived, before anything reads its body, except on ``open_paths`` (``/metrics``
    when ``api.metrics_auth`` is false). A body of at most
    ``UNAUTHENTICATED_DRAIN_LIMIT`` bytes is read and discarded first (so that a client
    sending it before it reads gets the 401, not a reset); a larger one, a chunked one
    growing past it, or one sent with ``Expect: 100-continue`` is left unread and the
    connection closed after the 401."""

    def __init__(self, app: ASGIApp, open_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if await caller_of(request) is not None:
            await self.app(scope, receive, send)
            return
        length: int | None = None
        chunked = waits = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = int(value) if value.isdigit() else UNAUTHENTICATED_DRAIN_LIMIT + 1
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"expect" and value.lower() == b"100-continue":
                waits = True
        unread = chunked or bool(length)
        if unread and not waits and (length or 0) <= UNAUTHENTICATED_DRAIN_LIMIT:
            unread = not await _drain(receive, UNAUTHENTICATED_DRAIN_LIMIT)
        credentials: Credentials = request.app.state.credentials
        headers = challenge_headers(credentials)
        if unread:
            headers["Connection"] = "close"
        response = JSONResponse(
            {"detail": "missing or wrong credentials"}, status_code=401, headers=headers
        )
        await response(scope, receive, send)


async def _drain(receive: Receive, limit: int = DRAIN_LIMIT) -> bool:
    """Reads and discards the rest of a request body, at most ``limit`` bytes and
    ``DRAIN_TIMEOUT_S`` seconds; True when it was read to its end."""
    drained = 0
    try:
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            while drained <= limit:
                message = await receive()
                if message["type"] != "http.request":
                    return False
                drained += len(message.get("body", b""))
                if not message.get("more_body"):
                    return drained <= limit
    except TimeoutError:
        return False
    return False


class _ConnectionCollector(Collector):
    """The ``edgebus_api_*`` metrics of the server's connections."""

    def __init__(self, connections: ApiConnections) -> None:
        self.connections = connections

    def collect(self) -> Iterator[Metric]:
        return metric_families(self.connections)


def _finite(value: Any) -> Any:
    """``value`` (JSON-able) with its non-finite floats as the strings ``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


async def _invalid_request(request: Request, exc: Exception) -> Response:
    """422 naming every problem, as FastAPI does, but in ASCII JSON: the input echoed
    back may hold lone surrogates, which UTF-8 cannot encode (FastAPI's own handler
    fails on them with a 500), and non-finite numbers (``NaN``, which Python's JSON
    parser accepts), which JSON cannot write: they are echoed as strings. A guarded
    route's request without valid credentials is a 401 instead: a body that is not JSON
    fails before the ``authenticate`` dependency runs."""
    route = request.scope.get("route")
    dependencies = getattr(getattr(route, "dependant", None), "dependencies", ())
    if any(d.call is authenticate for d in dependencies) and await caller_of(request) is None:
        # A body that is not JSON fails before the dependencies run: credentials first.
        credentials: Credentials = request.app.state.credentials
        return JSONResponse(
            {"detail": "missing or wrong credentials"},
            status_code=401,
            headers=challenge_headers(credentials),
        )
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = _finite(jsonable_encoder(errors))
    body = json.dumps({"detail": detail}, ensure_ascii=True, allow_nan=False)
    return Response(body, status_code=422, media_type="application/json")


def component_routers() -> list[APIRouter]:
    """The routers of every registered component type that has some (``api``)."""
    routers = []
    for entry in registry.TYPES.values():
        try:
            router = registry.load_api(entry)
        except ImportError as exc:
            log.warning("the API of the %s %s is not served: %s", entry.name, entry.kind, exc)
            continue
        if router is not None:
            routers.append(router)
    return routers


def create_app(
    gateway: GatewayView,
    credentials: Credentials | None = None,
    connections: ApiConnections | None = None,
) -> FastAPI:
    """The API of ``gateway``; ``credentials`` default to those of ``gateway.config.api``
    (which may read or create the key file). ``connections``: the server's, whose
    counters ``/metrics`` serves (none without a server: tests of the app alone)."""
    config = gateway.config
    if credentials is None:
        credentials = build_credentials(config.api, config.data_dir)
    app = FastAPI(
        title="edgebus management API",
        version=VERSION,
        description=_DESCRIPTION,
        openapi_url=None,  # served below, behind authentication
        docs_url=None,
        redoc_url=None,
    )
    app.state.gateway = gateway
    app.state.credentials = credentials
    app.state.registry = new_registry(gateway)
    if connections is not None:
        app.state.registry.register(_ConnectionCollector(connections))
    guarded = [Depends(authenticate), Depends(unique_keys)]
    unauthorized: dict[int | str, dict[str, Any]] = {
        401: {"description": "Missing or wrong credentials"}
    }
    for module in (
        broker,
        clients,
        subscriptions,
        topics,
        retained,
        publish,
        components,
        rules,
        instances,
        metrics,
        admin,
    ):
        app.include_router(
            module.router, prefix=PREFIX, dependencies=guarded, responses=unauthorized
        )
    for router in component_routers():
        app.include_router(router, prefix=PREFIX, dependencies=guarded, responses=unauthorized)
    app.include_router(
        metrics.prometheus_router,
        dependencies=guarded if config.api.metrics_auth else [],
        responses=unauthorized if config.api.metrics_auth else None,
    )

    @app.get(f"{PREFIX}/openapi.json", include_in_schema=False, dependencies=guarded)
    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(request.app.openapi())

    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_middleware(BodyLimit, limit=body_limit(gateway.broker.limits.max_packet_size))
    # Added last, so run first: credentials before the body's size or content.
    open_paths = frozenset() if config.api.metrics_auth else frozenset({"/metrics"})
    app.add_middleware(CredentialsFirst, open_paths=open_paths)
    return app
