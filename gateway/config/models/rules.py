"""``rules`` and ``webhooks``: acting on messages and events.

A rule is an SQL statement over the message stream (EMQX's rule language:
``SELECT payload.temp AS t, clientid FROM "sensors/#" WHERE payload.temp > 30``) and the
actions its result feeds. A webhook posts broker events to an HTTP endpoint.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from gateway.config.models.adapter_base import check_topic_template
from gateway.config.models.base import ConfigModel
from gateway.config.values import DurationSpec, HttpUrlSpec, TopicFilterSpec

__all__ = [
    "WEBHOOK_EVENTS",
    "LogAction",
    "RepublishAction",
    "RuleAction",
    "RuleConfig",
    "WebhookAction",
    "WebhookConfig",
    "check_webhook_references",
]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
# SELECT <fields> FROM "<filter>"[, "<filter>" ...] [WHERE <condition>]
_SQL = re.compile(
    r'^\s*SELECT\s+(?P<fields>.+?)\s+FROM\s+(?P<sources>"[^"]+"(\s*,\s*"[^"]+")*)'
    r"(\s+WHERE\s+(?P<where>.+))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)

WEBHOOK_EVENTS = (
    "client.connected",
    "client.disconnected",
    "session.subscribed",
    "session.unsubscribed",
    "message.publish",
    "message.delivered",
    "message.dropped",
)


class RepublishAction(ConfigModel):
    """Publish the rule's result as a new message."""

    type: Literal["republish"] = Field(description="Action type.")
    topic: Annotated[str, AfterValidator(check_topic_template)] = Field(
        description="Topic template over the selected fields, e.g. `alerts/{clientid}`."
    )
    qos: Literal[0, 1, 2] = Field(default=0, description="QoS of the new message.")
    retain: bool = Field(default=False, description="Retain flag of the new message.")


class WebhookAction(ConfigModel):
    """Post the rule's result to a webhook of the `webhooks` list."""

    type: Literal["webhook"] = Field(description="Action type.")
    webhook: str = Field(description="The `name` of an entry of `webhooks`.")


class LogAction(ConfigModel):
    """Log the rule's result (for debugging rules)."""

    type: Literal["log"] = Field(description="Action type.")
    level: Literal["debug", "info", "warning"] = Field(default="info", description="Log level.")


RuleAction = Annotated[RepublishAction | WebhookAction | LogAction, Field(discriminator="type")]


class RuleConfig(ConfigModel):
    """One rule: an SQL statement and its actions."""

    name: str = Field(pattern=_NAME, description="Unique name; counted in the metrics by it.")
    sql: str = Field(
        description='`SELECT <fields> FROM "<topic filter>"[, ...] [WHERE <condition>]`.'
    )
    enabled: bool = Field(default=True, description="Evaluate this rule.")
    description: str = Field(default="", description="Free text, shown by the API.")
    actions: tuple[RuleAction, ...] = Field(min_length=1, description="What to do with a match.")

    @field_validator("sql")
    @classmethod
    def _statement(cls, value: str) -> str:
        match = _SQL.match(value)
        if match is None:
            raise ValueError(
                f'expected SELECT <fields> FROM "<topic filter>" [WHERE <condition>], got {value!r}'
            )
        spec = TopicFilterSpec()
        for source in re.findall(r'"([^"]+)"', match.group("sources")):
            spec.validate(source)
        return value

    def sources(self) -> list[str]:
        match = _SQL.match(self.sql)
        assert match is not None
        return re.findall(r'"([^"]+)"', match.group("sources"))

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "enabled": self.enabled,
            "sql": self.sql,
            "description": self.description,
            "actions": [a.type for a in self.actions],
        }


class WebhookConfig(ConfigModel):
    """Broker events posted as JSON to an HTTP endpoint."""

    name: str = Field(pattern=_NAME, description="Unique name; rules refer to it.")
    url: Annotated[str, HttpUrlSpec()] = Field(description="Where events are posted.")
    events: tuple[Literal[WEBHOOK_EVENTS], ...] = Field(  # type: ignore[valid-type]
        default=(),
        description="Events to post: "
        + ", ".join(f"`{e}`" for e in WEBHOOK_EVENTS)
        + "; empty: only what rules send.",
    )
    topics: tuple[Annotated[str, TopicFilterSpec()], ...] = Field(
        default=("#",), description="Topic filters limiting the `message.*` events."
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers.")
    timeout: Annotated[float, DurationSpec()] = Field(
        default=5.0, gt=0, description="Timeout of one request."
    )
    retries: int = Field(default=3, ge=0, le=20, description="Retries of a failed request.")
    queue_size: int = Field(
        default=10_000,
        ge=1,
        description="Events waiting to be posted; when full the oldest is dropped (counted).",
    )


def check_webhook_references(
    rules: tuple[RuleConfig, ...], webhooks: tuple[WebhookConfig, ...]
) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems (path relative to the top level) for rules naming unknown webhooks."""
    known = {w.name for w in webhooks}
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for i, rule in enumerate(rules):
        for j, action in enumerate(rule.actions):
            if isinstance(action, WebhookAction) and action.webhook not in known:
                problems.append(
                    (("rules", i, "actions", j, "webhook"), f"no webhook named {action.webhook!r}")
                )
    return problems
