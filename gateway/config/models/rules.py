"""``rules`` and ``webhooks``: acting on messages and events.

A rule is an SQL statement over the message stream (EMQX's rule language:
``SELECT payload.temp AS t, clientid FROM "sensors/#" WHERE payload.temp > 30``) and the
actions its result feeds. A webhook posts broker events to an HTTP endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    Field,
    ModelWrapValidatorHandler,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gateway.config.errors import FieldProblems
from gateway.config.files import checks_files, client_tls_file_problems
from gateway.config.models.adapter_base import check_publish_topic_template
from gateway.config.models.base import ConfigModel, with_problems
from gateway.config.values import (
    DurationSpec,
    HttpUrlSpec,
    NameSpec,
    PathSpec,
    TopicFilterSpec,
)

if TYPE_CHECKING:
    from gateway.rules.compiler import CompiledStatement

__all__ = [
    "WEBHOOK_EVENTS",
    "BridgeAction",
    "LogAction",
    "RepublishAction",
    "RuleAction",
    "RuleConfig",
    "SqliteAction",
    "StreamAction",
    "WebhookAction",
    "WebhookConfig",
    "action_reference_problems",
    "check_rule_references",
    "compile_rule",
    "template_problems",
    "valid_actions",
]

log = logging.getLogger(__name__)

_TABLE = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"

#: Every broker event a webhook can post (``broker_core.observe``).
WEBHOOK_EVENTS = (
    "client.connect",
    "client.connack",
    "client.connected",
    "client.disconnected",
    "client.subscribe",
    "client.unsubscribe",
    "session.subscribed",
    "session.unsubscribed",
    "session.terminated",
    "message.publish",
    "message.delivered",
    "message.acked",
    "message.dropped",
)


class RepublishAction(ConfigModel):
    """Publish the rule's result as a new message."""

    type: Literal["republish"] = Field(description="Action type.")
    topic: Annotated[str, AfterValidator(check_publish_topic_template)] = Field(
        description="Topic template over the selected fields, e.g. `alerts/{clientid}`."
    )
    qos: Literal[0, 1, 2] = Field(default=0, description="QoS of the new message.")
    retain: bool = Field(default=False, description="Retain flag of the new message.")
    payload: str | None = Field(
        default=None,
        description="Payload template: text with `{field}` placeholders over the selected"
        ' fields (objects as JSON), e.g. `{"t": {temp}}`; none: the selected fields as a'
        " JSON object.",
    )


class SqliteAction(ConfigModel):
    """Insert the rule's result as a row of an SQLite table (created on demand)."""

    type: Literal["sqlite"] = Field(description="Action type.")
    table: str = Field(
        pattern=_TABLE,
        description="Table name; created on the first row with a column per selected field,"
        " and a column added when a new field appears.",
    )
    database: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="The SQLite file; relative paths are under `data_dir`."
        " Default: `rules.db` in `data_dir`.",
    )


class BridgeAction(ConfigModel):
    """Forward the rule's result through a named bridge: published locally on a topic
    that bridge forwards, so its own tap queues it (and only a topic it forwards)."""

    type: Literal["bridge"] = Field(description="Action type.")
    bridge: str = Field(description="The `name` of an entry of `bridges`.")
    topic: Annotated[str, AfterValidator(check_publish_topic_template)] = Field(
        description="Topic template over the selected fields; the rendered topic must match"
        " one of the bridge's `forwards[].local` filters, or the action fails (counted)."
    )
    qos: Literal[0, 1, 2] = Field(
        default=1,
        description="QoS of the message; with 1 or 2 the action succeeds once the bridge's"
        " disk queue holds it.",
    )
    retain: bool = Field(default=False, description="Retain flag of the message.")
    payload: str | None = Field(
        default=None, description="Payload template, as for `republish`; none: the result as JSON."
    )


class StreamAction(ConfigModel):
    """Append the rule's result to the stream log: published locally on a topic the
    stream log records (`stream.topics`), so its own hook appends it."""

    type: Literal["stream"] = Field(description="Action type.")
    topic: Annotated[str, AfterValidator(check_publish_topic_template)] = Field(
        description="Topic template over the selected fields; the rendered topic must match"
        " `stream.topics`, or the action fails (counted)."
    )
    qos: Literal[0, 1, 2] = Field(
        default=1,
        description="QoS of the message; with 1 or 2 the action succeeds once the stream log"
        " holds it.",
    )
    payload: str | None = Field(
        default=None, description="Payload template, as for `republish`; none: the result as JSON."
    )


class WebhookAction(ConfigModel):
    """Post the rule's result to a webhook of the `webhooks` list."""

    type: Literal["webhook"] = Field(description="Action type.")
    webhook: str = Field(description="The `name` of an entry of `webhooks`.")


class LogAction(ConfigModel):
    """Log the rule's result (for debugging rules)."""

    type: Literal["log"] = Field(description="Action type.")
    level: Literal["debug", "info", "warning"] = Field(default="info", description="Log level.")


RuleAction = Annotated[
    RepublishAction | SqliteAction | WebhookAction | BridgeAction | StreamAction | LogAction,
    Field(discriminator="type"),
]


class RuleConfig(ConfigModel):
    """One rule: an SQL statement and its actions."""

    name: Annotated[str, NameSpec()] = Field(
        description="Unique name; counted in the metrics by it."
    )
    sql: str = Field(
        description='`SELECT <fields> FROM "<topic filter>"[, ...] [WHERE <condition>]`;'
        " see docs/rules.md."
    )
    enabled: bool = Field(default=True, description="Evaluate this rule.")
    description: str = Field(default="", description="Free text, shown by the API.")
    actions: tuple[RuleAction, ...] = Field(min_length=1, description="What to do with a match.")

    @field_validator("sql")
    @classmethod
    def _statement(cls, value: str) -> str:
        compile_rule(value)  # RuleSyntaxError is a ValueError naming the position
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _templates_name_selected_fields(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        try:
            rule = handler(data)
        except ValidationError as exc:
            # another key's problem keeps the rule from being built: a statement that
            # compiles is still checked against the actions that are valid
            found: Problems = []
            sql = data.get("sql") if isinstance(data, dict) else None
            if isinstance(sql, str):
                name = data.get("name")
                actions = valid_actions(data.get("actions"), info.context)
                found = template_problems(name if isinstance(name, str) else None, sql,
                                          actions)  # fmt: skip
            raise with_problems(exc, found) from None
        problems = template_problems(rule.name, rule.sql, enumerate(rule.actions))
        if problems:
            raise FieldProblems(problems)
        return rule

    def sources(self) -> list[str]:
        from gateway.rules.parser import parse

        return list(parse(self.sql).sources)

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

    name: Annotated[str, NameSpec()] = Field(description="Unique name; rules refer to it.")
    url: Annotated[str, HttpUrlSpec()] = Field(description="Where events are posted.")
    events: tuple[Literal[WEBHOOK_EVENTS], ...] = Field(  # type: ignore[valid-type]
        default=(),
        description="Events to post: "
        + ", ".join(f"`{e}`" for e in WEBHOOK_EVENTS)
        + "; empty: only what rules send.",
    )
    topics: tuple[Annotated[str, TopicFilterSpec()], ...] = Field(
        default=("#",),
        description="Topic filters limiting the events that name a topic (`message.*`, and"
        " the subscription events by their filter).",
    )
    payload_encoding: Literal["plain", "base64"] = Field(
        default="plain",
        description="How message payloads are put in the body: `plain` (UTF-8 text; base64"
        " when not UTF-8) or `base64`.",
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers.")
    secret: SecretStr | None = Field(
        default=None,
        description="Signs each body with HMAC-SHA256 under this key, in the"
        " `signature_header` as `sha256=<hex>`; write it as `${ENV_VAR}`.",
    )
    signature_header: str = Field(
        default="X-Edgebus-Signature", description="Header carrying the HMAC signature."
    )
    timeout: Annotated[float, DurationSpec(gt=0)] = Field(
        default=5.0, description="Timeout of one request."
    )
    retries: int = Field(default=3, ge=0, le=20, description="Retries of a failed request.")
    retry_backoff: Annotated[float, DurationSpec(gt=0)] = Field(
        default=0.5, description="First wait before a retry; doubles with each retry."
    )
    pool_size: int = Field(
        default=4, ge=1, le=100, description="Connections (and requests in flight) at most."
    )
    queue_size: int = Field(
        default=10_000,
        ge=1,
        description="Events waiting to be posted; when full the oldest is dropped (counted).",
    )
    tls_verify: bool = Field(
        default=True, description="Verify an `https://` endpoint's certificate."
    )
    cafile: Annotated[Path, PathSpec()] | None = Field(
        default=None, description="CA bundle for an `https://` endpoint; default: the system's."
    )

    @field_validator("cafile")
    @classmethod
    def _usable_cafile(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and checks_files(info.context):
            problems = client_tls_file_problems(value, None, None)
            if problems:
                raise FieldProblems(((), message) for _, message in problems)
        return value


Problems = list[tuple[tuple[str | int, ...], str]]


def compile_rule(sql: str) -> CompiledStatement:
    """``sql`` compiled by the rule engine's own compiler; every way it can fail is a
    ``ValueError`` (a validation problem of ``sql``, with the file, path and line),
    never another exception: ``RuleSyntaxError`` names the position; a statement too
    large for Python's stack (``RecursionError``, ``MemoryError``) or one the compiler
    fails on unexpectedly (logged with its traceback) is refused saying so."""
    from gateway.rules.compiler import compile_statement  # the rule engine's own parser
    from gateway.rules.parser import RuleSyntaxError

    try:
        return compile_statement(sql)
    except RuleSyntaxError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise ValueError(
            f"the statement is too large to compile ({type(exc).__name__}): write it as"
            " several rules, or with shorter expressions"
        ) from None
    except Exception as exc:
        log.exception("rule statement %r: the compiler failed", sql[:200])
        raise ValueError(
            f"the statement could not be compiled ({type(exc).__name__}: {exc})"
        ) from None


def check_rule_references(
    rules: tuple[RuleConfig, ...],
    webhooks: tuple[WebhookConfig, ...],
    bridges: tuple[str, ...],
    stream_enabled: bool,
) -> Problems:
    """Problems (path relative to the top level) for rules naming unknown webhooks or
    bridges (``bridges``: the configured bridges' names), or appending to a stream log
    that is not enabled."""
    actions = ((i, j, action) for i, rule in enumerate(rules)
               for j, action in enumerate(rule.actions))  # fmt: skip
    return action_reference_problems(actions, {w.name for w in webhooks}, bridges,
                                     stream_enabled)  # fmt: skip


def action_reference_problems(
    actions: Iterable[tuple[int, int, RuleAction]],
    webhooks: Collection[str],
    bridges: Collection[str],
    stream_enabled: bool | None,
) -> Problems:
    """:func:`check_rule_references` for ``(rule index, action index, action)``; the
    names of the webhooks and bridges; ``stream_enabled`` None: not known (not checked)."""
    problems: Problems = []
    for i, j, action in actions:
        where: tuple[str | int, ...] = ("rules", i, "actions", j)
        if isinstance(action, WebhookAction) and action.webhook not in webhooks:
            problems.append(((*where, "webhook"), f"no webhook named {action.webhook!r}"))
        if isinstance(action, BridgeAction) and action.bridge not in bridges:
            problems.append(((*where, "bridge"), f"no bridge named {action.bridge!r}"))
        if isinstance(action, StreamAction) and stream_enabled is not None and not stream_enabled:
            problems.append(((*where, "type"), "the stream log is not enabled (`stream`)"))
    return problems


def template_problems(
    rule: str | None, sql: str, actions: Iterable[tuple[int, RuleAction]]
) -> Problems:
    """Problems (path relative to the rule) for the templates of ``actions`` that name a
    field no result of ``sql`` holds (``gateway.rules.selected``): a topic then fails on
    every result, a payload placeholder is empty on every one; and for a ``sqlite``
    action of a SELECT giving fields whose names differ only by case (``AS a``,
    ``AS `A```: one SQLite column, every row would fail). None when ``sql`` does not
    compile (reported on its own); no template is refused after ``SELECT *``, whose
    columns (``topic``, ``clientid``, ...) are compared with the other fields' names."""
    from gateway.rules.selected import (
        case_clashes,
        result_fields,
        sqlite_columns,
        unselected_fields,
    )

    try:
        statement = compile_rule(sql).statement
    except ValueError:
        return []
    which = "the rule" if rule is None else f"rule {rule!r}"
    problems: Problems = []
    clashes = case_clashes(sqlite_columns(statement))
    selected = result_fields(statement)
    if selected is None:
        for index, action in actions:
            if isinstance(action, SqliteAction) and clashes:
                problems.append((("actions", index, "table"), _clash_problem(which, clashes)))
        return problems
    gives = ", ".join(".".join(path) for path in selected)
    for index, action in actions:
        if isinstance(action, SqliteAction) and clashes:
            problems.append((("actions", index, "table"), _clash_problem(which, clashes)))
        for key in ("topic", "payload"):
            template = getattr(action, key, None)
            if not isinstance(template, str):
                continue
            missing = unselected_fields(statement, template, topic=key == "topic")
            if not missing:
                continue
            effect = (
                "the action would fail on every result (no topic)"
                if key == "topic"
                else "empty in every payload"
            )
            problems.append((
                ("actions", index, key),
                f"{key} template {template!r} names {', '.join(map(repr, missing))}, which"
                f" the SELECT of {which} does not give (it gives {gives}): {effect}",
            ))  # fmt: skip
    return problems


def _clash_problem(which: str, clashes: list[tuple[str, ...]]) -> str:
    named = "; ".join(" and ".join(map(repr, group)) for group in clashes)
    return (
        f"the SELECT of {which} gives fields whose names differ only by case ({named}),"
        " which SQLite takes as one column: every row would fail; name them apart with AS"
    )


@cache
def _action_adapter() -> TypeAdapter[RuleAction]:
    return TypeAdapter(RuleAction)


def valid_actions(actions: object, context: Any = None) -> list[tuple[int, RuleAction]]:
    """The entries of a rule's ``actions`` as written (the YAML's list) that are valid
    on their own, by index: what the checks between keys still look at when another
    entry, or another key, has a problem that keeps the models from being built."""
    if not isinstance(actions, list | tuple):
        return []
    found: list[tuple[int, RuleAction]] = []
    for index, entry in enumerate(actions):
        try:
            found.append((index, _action_adapter().validate_python(entry, context=context)))
        except ValidationError:
            continue  # reported where the rule is validated
    return found
