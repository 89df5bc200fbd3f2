"""What a rule does with a result: republish, insert into SQLite, post to a webhook,
forward through a bridge, append to the stream log, log.

Each action is built from its config entry (``gateway.config.models.rules``) and runs on
the loop, in the rule engine's worker, without blocking: a republish goes through the
rule's hub client (the broker's publish policy and ACL); a SQLite row and a webhook
post are handed to a bounded queue served elsewhere. Each counts ``succeeded`` and
``failed`` (for the queued ones, once the row is written or the post answered).

The bridge and stream actions reach those components the way every message does: the
result is published through the hub on a topic the named bridge forwards (its durable
tap queues it) or the stream log records (its durable hook appends it); the action
checks the topic first, and with QoS 1/2 succeeds once the message is durable there
(``HubClient.publish``'s ``on_safe``). Nothing here imports the bridge or the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.context import Context
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.topics import abbreviate
from gateway.hub import HubClient
from gateway.mapping import FilterTemplate, MappingError, TopicTemplate
from gateway.rules.functions import to_json, to_text
from gateway.rules.selected import PLACEHOLDER
from gateway.rules.sqlite_table import SqliteTables

if TYPE_CHECKING:
    from gateway.config.models.rules import (
        BridgeAction,
        LogAction,
        SqliteAction,
        WebhookAction,
    )

__all__ = [
    "Action",
    "ActionContext",
    "Targets",
    "WebhookSender",
    "build_action",
    "render_payload",
]

log = logging.getLogger(__name__)



class WebhookSender(Protocol):
    def post(self, name: str, body: dict[str, Any], done: Callable[[bool], None]) -> bool: ...


class Targets(Protocol):
    """Where the bridge and stream actions may publish (the gateway's configuration)."""

    def bridge_forwards(self, name: str) -> tuple[str, ...] | None:
        """The ``forwards[].local`` filter templates of bridge ``name``; None if none."""
        ...

    def stream_accepts(self, topic: str) -> str | None:
        """None when the stream log records ``topic`` from a rule, else why not."""
        ...


class ActionContext:
    """What actions need from the engine: the rule's hub client, the SQLite databases,
    the webhooks."""

    def __init__(
        self,
        client: HubClient,
        tables: Callable[[Path | None], SqliteTables],
        webhooks: WebhookSender | None,
        targets: Targets | None = None,
    ) -> None:
        self.client = client
        self.tables = tables
        self.webhooks = webhooks
        self.targets = targets


def _value(out: dict[str, Any], path: str) -> Any:
    if path in out:
        return out[path]
    node: Any = out
    for part in path.replace("[", ".").replace("]", "").split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.lstrip("-").isdigit():
            index = int(part)
            node = node[index] if -len(node) <= index < len(node) else None
        else:
            return None
    return node


#: ``PLACEHOLDER`` on a template's UTF-8 bytes (the pattern is ASCII: it finds the same).
_PLACEHOLDER_BYTES = re.compile(PLACEHOLDER.pattern.encode("ascii"))


def _field_bytes(value: Any) -> bytes:
    """A field in a payload template: bytes (a payload that is not UTF-8) as they are,
    anything else as its text in UTF-8."""
    return value if isinstance(value, bytes) else to_text(value).encode()


def render_payload(template: str | None, out: dict[str, Any]) -> bytes:
    """The payload of a result: the template with each ``{field}`` filled in (objects as
    JSON, NULL as nothing, binary as its bytes), or the result as JSON when there is no
    template."""
    if template is None:
        return to_json(out).encode()
    return _PLACEHOLDER_BYTES.sub(
        lambda m: _field_bytes(_value(out, m.group(1).decode("ascii"))), template.encode()
    )


def _flat(out: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}`` too, for topic templates."""
    flat: dict[str, Any] = {}
    for key, value in out.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, name + "."))
        else:
            flat[name] = value
    return flat


class Action:
    type = "action"

    def __init__(self) -> None:
        self.succeeded = 0
        self.failed = 0
        self.rule = ""  # the rule's name, for the log (set by ``build_action``)

    def run(self, out: dict[str, Any]) -> None:
        raise NotImplementedError

    def fail(self, problem: object) -> None:
        """Counts a failed run and logs why: the first failure and every 1000th, so that
        a stream of failing results cannot flood the log."""
        self.failed += 1
        if self.failed == 1 or self.failed % 1000 == 0:
            log.warning(
                "rule %s: action %s failed (%d so far): %s",
                self.rule, self.type, self.failed, problem,
            )  # fmt: skip

    def stats(self) -> dict[str, Any]:
        return {"type": self.type, "succeeded": self.succeeded, "failed": self.failed}


class Republish(Action):
    type = "republish"

    def __init__(self, config: Any, context: ActionContext) -> None:
        super().__init__()
        self.topic = TopicTemplate(config.topic)
        self.payload = config.payload
        self.qos = config.qos
        self.retain = getattr(config, "retain", False)
        self.client = context.client

    def run(self, out: dict[str, Any]) -> None:
        try:
            topic = self.topic.render(_flat(out), out.get("payload"))
        except MappingError as exc:  # NULL, '+', '#', a list...: no topic, nothing sent
            self.fail(f"topic {self.topic.text!r}: {exc}")
            return
        message = self.client.context(topic, render_payload(self.payload, out), self.qos,
                                      self.retain)  # fmt: skip
        self.send(message)

    def send(self, message: Context) -> None:
        if self.client.publish(message):
            self.succeeded += 1
        else:
            self.fail(f"the broker refused {abbreviate(message.topic)}: {self.client.refusal}")


@lru_cache(maxsize=256)
def _filter(template: str) -> FilterTemplate:
    return FilterTemplate(template)


class _Delivered(Republish):
    """A republish to a topic a component picks up: checked first, counted once durable."""

    accepts_unrouted = False  # whether 0x10 No matching subscribers is a success

    def __init__(self, config: Any, context: ActionContext) -> None:
        super().__init__(config, context)
        self.targets = context.targets

    def problem(self, topic: str) -> str | None:
        raise NotImplementedError

    def send(self, message: Context) -> None:
        problem = self.problem(message.topic)
        if problem is not None:
            self.fail(problem)
            return
        self.client.publish(message, self._safe)

    def _safe(self, code: int) -> None:
        unrouted = code == ReasonCode.NO_MATCHING_SUBSCRIBERS
        if code < 0x80 and (not unrouted or self.accepts_unrouted):
            self.succeeded += 1
        else:
            self.fail(f"not taken: reason code 0x{code:02x}")


class ForwardToBridge(_Delivered):
    type = "bridge"

    def __init__(self, config: BridgeAction, context: ActionContext) -> None:
        super().__init__(config, context)
        self.bridge = config.bridge

    def problem(self, topic: str) -> str | None:
        forwards = None if self.targets is None else self.targets.bridge_forwards(self.bridge)
        if forwards is None:
            return f"no bridge named {self.bridge!r}"
        if not any(_filter(f).match(topic) is not None for f in forwards):
            return f"the bridge {self.bridge!r} does not forward {topic!r}"
        return None


class AppendToStream(_Delivered):
    type = "stream"
    accepts_unrouted = True  # the log's hook is no subscriber: 0x10 is normal

    def problem(self, topic: str) -> str | None:
        if self.targets is None:
            return "the stream log is not enabled"
        return self.targets.stream_accepts(topic)


class SqliteInsert(Action):
    type = "sqlite"

    def __init__(self, config: SqliteAction, context: ActionContext) -> None:
        super().__init__()
        self.table = config.table
        self.tables = context.tables(config.database)

    def run(self, out: dict[str, Any]) -> None:
        if not self.tables.insert(self, self.table, out):
            self.fail(f"table {self.table}: the SQLite writer is behind by its limit of rows")


class WebhookPost(Action):
    type = "webhook"

    def __init__(self, config: WebhookAction, context: ActionContext) -> None:
        super().__init__()
        self.webhook = config.webhook
        self.webhooks = context.webhooks

    def _done(self, ok: bool) -> None:
        if ok:
            self.succeeded += 1
        else:
            self.failed += 1

    def run(self, out: dict[str, Any]) -> None:
        if self.webhooks is None or not self.webhooks.post(self.webhook, out, self._done):
            self.fail(f"no webhook {self.webhook!r} is running")


class Log(Action):
    type = "log"

    def __init__(self, config: LogAction, context: ActionContext, rule: str) -> None:
        super().__init__()
        self.level = logging.getLevelName(config.level.upper())
        self.rule = rule

    def run(self, out: dict[str, Any]) -> None:
        if log.isEnabledFor(self.level):
            log.log(self.level, "rule %s: %s", self.rule, to_json(out))
        self.succeeded += 1


def build_action(config: Any, context: ActionContext, rule: str) -> Action:
    """The action of ``config``, chosen by its ``type`` (the schema's discriminator): the
    model, or its view in a gateway that does not load the schema (gateway.config.light)."""
    kind = getattr(config, "type", None)
    action: Action
    if kind == "republish":
        action = Republish(config, context)
    elif kind == "sqlite":
        action = SqliteInsert(config, context)
    elif kind == "webhook":
        action = WebhookPost(config, context)
    elif kind == "log":
        action = Log(config, context, rule)
    elif kind == "bridge":
        action = ForwardToBridge(config, context)
    elif kind == "stream":
        action = AppendToStream(config, context)
    else:
        raise TypeError(f"unknown rule action {config!r}")
    action.rule = rule
    return action
