"""``Webhooks``: broker events posted as JSON to HTTP endpoints (docs/webhooks.md).

Each configured webhook observes the broker events it lists (``broker.observers``); the
observer tests the topic filters and appends the event to the webhook's queue, nothing
more, so a slow or dead endpoint never slows the broker. The queue is bounded
(``queue_size``); when it is full the oldest event is dropped and counted (``dropped``,
``edgebus_webhook_dropped_total``), as are the events still queued or being posted at
shutdown (one log line per webhook with their number). ``pool_size`` workers post the queue over one
aiohttp session whose connection pool holds ``pool_size`` connections (keep-alive,
HTTPS with ``tls_verify`` / ``cafile``); a request that times out (``timeout``), fails
to connect or gets a 5xx / 408 / 429 is retried ``retries`` times with a backoff
doubling from ``retry_backoff``; then it counts as ``failed``.

The body is the event's row (``gateway.rules.fields.event_row``): EMQX's field names
(``clientid``, ``username``, ``peername``, ``proto_ver``, ``topic``, ``qos``,
``payload``, ``timestamp`` in ms...), plus ``action`` (``client_connected``, as EMQX 4
and NanoMQ name it) and ``event`` (``client.connected``, as EMQX 5). Payloads are
UTF-8 text (``payload_encoding: plain``; base64 with ``"payload_encoding": "base64"``
when the payload is not UTF-8) or base64 (``base64``). With a ``secret`` each request
carries ``<signature_header>: sha256=<hex HMAC-SHA256 of the body>``.

Rules post their results through ``post(name, body, done)`` onto the same queues.

A URL's user info and the values of its secret query parameters (``token``, ``api_key``,
``X-Amz-Signature``...; ``gateway.api.masking``) are secrets: the counters (``stats()``,
in ``GET /api/v1/metrics``) and the log show them masked
(``https://**********@host/x?token=**********``), as ``GET /config`` does, and a failed
attempt's log line masks them in the HTTP client's error (aiohttp names the URL in some:
``ConnectionTimeoutError``) and in a redirect's ``Location``. Requests go to the URL as
written.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from broker_core.broker import Broker
from broker_core.errors import MalformedPacket
from broker_core.mqtt.topics import filter_matches, parse_shared
from broker_core.observe import EVENT_KINDS, BrokerEvent
from gateway.api.masking import mask_secrets, mask_url, url_secrets
from gateway.rules.fields import event_row
from gateway.rules.functions import to_json

if TYPE_CHECKING:
    import aiohttp

    from gateway.config.models.rules import WebhookConfig

__all__ = ["Webhook", "Webhooks"]

log = logging.getLogger(__name__)

_KINDS = {kind.NAME: kind for kind in EVENT_KINDS}
_RETRY_STATUS = frozenset({408, 429})

# A queued entry: a broker event, or a rule's result with its completion callback.
Entry = BrokerEvent | tuple[dict[str, Any], Callable[[bool], None]]


def _topic_of(event: BrokerEvent) -> str | None:
    message = getattr(event, "message", None)
    if message is not None:
        return str(message.topic)
    topic_filter = getattr(event, "topic_filter", None)
    if topic_filter is None:
        return None
    # A shared subscription is judged by its inner filter, as the ACL and /topics do.
    try:
        shared = parse_shared(str(topic_filter))
    except MalformedPacket:  # client.subscribe comes before the checks
        return str(topic_filter)
    return str(topic_filter) if shared is None else shared.topic_filter


class Webhook:
    """One endpoint: its queue, workers, session and counters."""

    def __init__(self, config: WebhookConfig, node: str) -> None:
        self.config = config
        self.name = config.name
        #: the URL as shown (counters, log lines): its secrets masked, as /config shows it
        self.shown_url = mask_url(config.url)
        self._url_secrets = url_secrets(config.url)
        self.node = node
        self.queued = 0
        self.sent = 0
        self.failed = 0
        self.retried = 0
        self.dropped = 0
        self._cut_off = 0  # entries whose post a shutdown interrupted
        self._queue: deque[Entry] = deque()
        self._ready = asyncio.Event()
        self._filters = config.topics
        self._all_topics = "#" in config.topics
        secret = config.secret
        self._secret = None if secret is None else secret.get_secret_value().encode()
        self._headers = {"Content-Type": "application/json", **config.headers}

    @property
    def depth(self) -> int:
        return len(self._queue)

    def stats(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.shown_url,
            "queued": self.queued,
            "sent": self.sent,
            "failed": self.failed,
            "retried": self.retried,
            "dropped": self.dropped,
            "queue_depth": len(self._queue),
            "queue_size": self.config.queue_size,
        }

    # -- on the broker's path: append and return ---------------------------------------

    def observe(self, event: BrokerEvent) -> None:
        topic = _topic_of(event)
        if (
            topic is not None
            and (not self._all_topics or topic.startswith("$"))
            and not any(filter_matches(f, topic) for f in self._filters)
        ):
            return
        self.append(event)

    def append(self, entry: Entry) -> None:
        queue = self._queue
        if len(queue) >= self.config.queue_size:
            old = queue.popleft()
            self.dropped += 1
            if isinstance(old, tuple):
                old[1](False)
        queue.append(entry)
        self.queued += 1
        if not self._ready.is_set():
            self._ready.set()

    def abandon(self) -> int:
        """At shutdown, once the workers stopped: the entries still queued, and those
        whose post was interrupted, counted in ``dropped`` (a rule's result fails its
        action); how many."""
        count = len(self._queue) + self._cut_off
        while self._queue:
            entry = self._queue.popleft()
            if isinstance(entry, tuple):
                entry[1](False)
        self._cut_off = 0
        self.dropped += count
        return count

    # -- workers ------------------------------------------------------------------------

    def body(self, entry: Entry) -> bytes:
        if isinstance(entry, tuple):
            return to_json(entry[0]).encode()
        row = event_row(entry, self.node)
        row["action"] = entry.NAME.replace(".", "_")
        payload = row.get("payload")
        if payload is not None and (
            self.config.payload_encoding == "base64" or isinstance(payload, bytes)
        ):
            raw = payload if isinstance(payload, bytes) else payload.encode()
            row["payload"] = base64.b64encode(raw).decode("ascii")
            row["payload_encoding"] = "base64"
        return to_json(row).encode()

    def headers(self, body: bytes) -> dict[str, str]:
        if self._secret is None:
            return self._headers
        digest = hmac.new(self._secret, body, hashlib.sha256).hexdigest()
        return {**self._headers, self.config.signature_header: f"sha256={digest}"}

    async def work(self, session: aiohttp.ClientSession) -> None:
        queue = self._queue
        while True:
            if not queue:
                self._ready.clear()
                await self._ready.wait()
                continue
            entry = queue.popleft()
            try:
                ok = await self._post(session, self.body(entry))
            except asyncio.CancelledError:  # shutdown: counted by abandon()
                self._cut_off += 1
                if isinstance(entry, tuple):
                    entry[1](False)
                raise
            except Exception:  # a bug in a body: counted, the worker goes on
                log.exception("webhook %s: could not post an event", self.name)
                ok = False
            if ok:
                self.sent += 1
            else:
                self.failed += 1
            if isinstance(entry, tuple):
                entry[1](ok)

    async def _post(self, session: aiohttp.ClientSession, body: bytes) -> bool:
        import aiohttp  # loaded with the first webhook, not by every gateway

        config = self.config
        headers = self.headers(body)
        delay = config.retry_backoff
        for attempt in range(config.retries + 1):
            if attempt:
                self.retried += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60.0)
            try:
                # Redirects are not followed: the event, its headers and signature go to
                # the URL configured and nowhere else; a 3xx is a failure.
                async with session.post(
                    config.url, data=body, headers=headers, allow_redirects=False
                ) as response:
                    await response.read()
                    if response.status < 300:
                        return True
                    problem = f"HTTP {response.status}"
                    if response.status < 400:
                        location = _shown_location(response.headers.get("Location", ""))
                        problem += f" to {location!r} (redirects are not followed)"
                    if response.status < 500 and response.status not in _RETRY_STATUS:
                        log.warning("webhook %s: %s, not retried", self.name, problem)
                        return False
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                problem = mask_secrets(f"{type(exc).__name__}: {exc}", self._url_secrets)
            if self.failed == 0 or log.isEnabledFor(logging.DEBUG):
                log.warning("webhook %s: attempt %d: %s", self.name, attempt + 1, problem)
        return False


class Webhooks:
    """Every configured webhook; ``run()`` serves them until cancelled."""

    def __init__(self, configs: Iterable[WebhookConfig], broker: Broker, node: str = "edgebus"):
        self.broker = broker
        self.node = node
        self.configs = tuple(configs)
        self._hooks: dict[str, Webhook] = {}

    def __len__(self) -> int:
        return len(self.configs)

    def statuses(self) -> list[dict[str, Any]]:
        return [hook.stats() for hook in self._hooks.values()]

    def post(self, name: str, body: dict[str, Any], done: Callable[[bool], None]) -> bool:
        """Queues a rule's result for webhook ``name``; ``done(ok)`` once posted (or
        failed, or dropped). False when there is no such webhook running."""
        hook = self._hooks.get(name)
        if hook is None:
            return False
        hook.append((body, done))
        return True

    async def run(self) -> None:
        if self.configs:
            import aiohttp  # loaded only when a webhook is configured
        undo: list[Callable[[], None]] = []
        sessions: list[aiohttp.ClientSession] = []
        try:
            async with asyncio.TaskGroup() as tg:
                for config in self.configs:
                    hook = self._hooks[config.name] = Webhook(config, self.node)
                    session = aiohttp.ClientSession(
                        connector=aiohttp.TCPConnector(limit=config.pool_size, ssl=_ssl(config)),
                        timeout=aiohttp.ClientTimeout(total=config.timeout),
                    )
                    sessions.append(session)
                    kinds = [_KINDS[name] for name in config.events]
                    if kinds:
                        undo.append(self.broker.observers.observe(kinds, hook.observe))
                    for index in range(config.pool_size):
                        tg.create_task(hook.work(session), name=f"webhook-{config.name}-{index}")
                    log.info(
                        "webhook %s: posting %s to %s",
                        config.name,
                        ", ".join(config.events) or "rule results",
                        hook.shown_url,
                    )
        finally:
            for stop in undo:
                stop()
            for hook in self._hooks.values():
                if abandoned := hook.abandon():
                    log.warning(
                        "webhook %s: %d event(s) not posted at shutdown, counted as dropped"
                        " (%d dropped in all)", hook.name, abandoned, hook.dropped,
                    )  # fmt: skip
            for session in sessions:
                await session.close()


def _shown_location(location: str) -> str:
    """A redirect's ``Location`` as the log shows it: its secrets masked, as the URL's."""
    try:
        return mask_url(location)
    except ValueError:  # a port that is not a number, say
        return "(not a URL)"


def _ssl(config: WebhookConfig) -> ssl.SSLContext | bool:
    if not config.url.startswith("https:"):
        return False
    if not config.tls_verify:
        return False
    context = ssl.create_default_context(
        cafile=None if config.cafile is None else str(config.cafile)
    )
    return context
