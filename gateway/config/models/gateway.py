"""``GatewayConfig``: the whole file, one field per top-level section.

Adding a section is adding a model module and one field here; the loader, the error
messages and the reference documentation follow from the schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gateway.config.errors import FieldProblems, format_path
from gateway.config.files import checks_files, data_dir_problem, key_file_problem
from gateway.config.introspect import Loc
from gateway.config.models.adapters import AdapterConfig
from gateway.config.models.api import ApiConfig, default_key_file
from gateway.config.models.base import ConfigModel, valid_items, with_problems
from gateway.config.models.binds import Bound, adapter_binds, bind_problems
from gateway.config.models.bridges import BridgeConfig
from gateway.config.models.listeners import ListenerConfig
from gateway.config.models.mqtt import MqttConfig
from gateway.config.models.rules import (
    RuleConfig,
    WebhookConfig,
    action_reference_problems,
    check_rule_references,
    valid_actions,
)
from gateway.config.models.security import AclConfig, AuthConfig
from gateway.config.models.stream import StreamConfig
from gateway.config.models.system import LoggingConfig, SysConfig
from gateway.config.models.topic_levels import component_filter_problems, too_deep_message
from gateway.config.values import PathSpec

__all__ = ["GatewayConfig"]


def _key(item: object, name: str) -> object:
    """``item[name]`` of a mapping as written, or the attribute of a model given as is."""
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _listed(section: object) -> list[object]:
    return list(section) if isinstance(section, list | tuple) else []


def _references_as_written(data: object, context: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """``check_rule_references`` on the file as written, when a problem elsewhere keeps
    ``GatewayConfig`` from being built: every valid action of every rule, against the
    names the webhooks and bridges are given (valid or not: a webhook with a bad URL
    still exists for the rules); the stream log's ``enabled`` as written (when it is not
    a boolean, the stream actions are not checked)."""
    if not isinstance(data, Mapping):
        return []
    webhooks = {name for hook in _listed(data.get("webhooks"))
                if isinstance(name := _key(hook, "name"), str)}  # fmt: skip
    bridges = {name for bridge in _listed(data.get("bridges"))
               if isinstance(name := _key(bridge, "name"), str)}  # fmt: skip
    stream = data.get("stream")
    unset = stream is None or (isinstance(stream, Mapping) and "enabled" not in stream)
    enabled = False if unset else _key(stream, "enabled")  # the default: not enabled
    actions = ((i, j, action) for i, rule in enumerate(_listed(data.get("rules")))
               for j, action in valid_actions(_key(rule, "actions"), context))  # fmt: skip
    return action_reference_problems(actions, webhooks, bridges,
                                     enabled if isinstance(enabled, bool) else None)  # fmt: skip


#: The sections whose entries have unique names.
_NAMED = ("adapters", "bridges", "rules", "webhooks")


def _names_as_written(data: Mapping[str, Any], sections: set[str]) -> list[tuple[Loc, str]]:
    """``_unique_names`` on the ``sections`` that have problems (where the field validator
    does not run): the names as written, valid or not."""
    problems: list[tuple[Loc, str]] = []
    for section in _NAMED:
        if section not in sections:
            continue
        seen: dict[str, int] = {}
        for index, item in enumerate(_listed(data.get(section))):
            name = _key(item, "name")
            if not isinstance(name, str):
                continue
            first = seen.setdefault(name, index)
            if first != index:
                problems.append(
                    (
                        (section, index, "name"),
                        f"{name!r} is already the name of {section}[{first}]",
                    )
                )
    return problems


def _reported(exc: ValidationError) -> set[tuple[Loc, str]]:
    """The ``(path, message)`` problems a field validator of ``exc`` reported through
    ``FieldProblems`` (``_unique_names``): not to be reported again as written."""
    reported: set[tuple[Loc, str]] = set()
    for error in exc.errors(include_url=False):
        found = error.get("ctx", {}).get("error")
        if isinstance(found, FieldProblems):
            loc = tuple(error["loc"])
            reported.update(((*loc, *path), message) for path, message in found.problems)
    return reported


def _servers_as_written(data: Mapping[str, Any]) -> list[Bound]:
    """The listeners (each valid one; the defaults when the file has none) and the API."""
    servers: list[Bound] = []
    if data.get("listeners") is None:
        listeners: list[ListenerConfig | None] = list(_default_listeners())
    else:
        listeners = valid_items(ListenerConfig, data.get("listeners"), None)
    for index, listener in enumerate(listeners):
        if listener is not None:
            servers.append(Bound(("listeners", index), str(listener.bind), listener.bind))
    try:
        api = ApiConfig.model_validate(data.get("api") or {})
    except ValidationError:
        return servers
    if api.enabled:
        servers.append(Bound(("api", "bind"), str(api.bind), api.bind))
    return servers


def _binds_as_written(data: object) -> list[tuple[Loc, str]]:
    """An adapter ``bind`` on the address of a listener, of the API or of another
    adapter (``binds``)."""
    if not isinstance(data, Mapping):
        return []
    adapters = list(adapter_binds(data.get("adapters")))
    if not adapters:
        return []
    return bind_problems(_servers_as_written(data), adapters)


def _api_collisions(
    api: ApiConfig, listeners: Sequence[ListenerConfig | None]
) -> list[tuple[Loc, str]]:
    """The API's ``bind`` on a listener's address (each valid listener)."""
    problems: list[tuple[Loc, str]] = []
    if not api.enabled:
        return problems
    for index, listener in enumerate(listeners):
        if listener is not None and api.bind.overlaps(listener.bind):
            shown = "" if api.bind == listener.bind else f" ({listener.bind})"
            problems.append(
                (
                    ("api", "bind"),
                    f"address {api.bind} is already used by"
                    f" {format_path(('listeners', index))}{shown}",
                )
            )
    return problems


def _api_collisions_as_written(data: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """``_api_collisions`` when ``listeners`` has a problem of its own (two listeners on
    one address), so that the API's field validator did not see them."""
    try:
        api = ApiConfig.model_validate(data.get("api") or {})
    except ValidationError:
        return []  # reported where it is validated
    return _api_collisions(api, valid_items(ListenerConfig, data.get("listeners"), None))


def _default_listeners() -> tuple[ListenerConfig, ...]:
    return (
        ListenerConfig.model_validate({"type": "tcp", "bind": "127.0.0.1:1883"}),
        ListenerConfig.model_validate({"type": "ws", "bind": "127.0.0.1:8083"}),
    )


class GatewayConfig(ConfigModel):
    """The top level of the configuration file."""

    node_name: str = Field(
        default="edgebus@127.0.0.1",
        min_length=1,
        description="This node's name in `$SYS` topics, logs and the API.",
    )
    persistence: Literal["sqlite", "memory"] = Field(
        default="sqlite",
        description="`sqlite`: sessions, retained messages and queues survive a restart"
        " (SQLite in WAL mode, in `data_dir`); `memory`: nothing survives a restart.",
    )
    data_dir: Annotated[Path, PathSpec()] = Field(
        default=Path("edgebus-data"),
        description="Directory of the persistent state (created when missing); relative"
        " to the working directory. One gateway per directory: `edgebus run` locks"
        " `edgebus.lock` in it while it runs, and a second gateway is refused.",
        validate_default=True,
    )
    listeners: tuple[ListenerConfig, ...] = Field(
        default_factory=_default_listeners,
        description="The MQTT listeners; an empty list runs the broker without any.",
        json_schema_extra={
            "doc_default": "`tcp` on 127.0.0.1:1883 and `ws` on 127.0.0.1:8083 (`/mqtt`)"
        },
    )
    mqtt: MqttConfig = Field(default_factory=MqttConfig, description="MQTT protocol limits.")
    auth: AuthConfig = Field(default_factory=AuthConfig, description="Authentication.")
    acl: AclConfig = Field(default_factory=AclConfig, description="Topic access control.")
    sys: SysConfig = Field(default_factory=SysConfig, description="`$SYS` topics.")
    api: ApiConfig = Field(
        default_factory=ApiConfig,
        description="HTTP management API and `/metrics`.",
        validate_default=True,
    )
    logging: LoggingConfig = Field(default_factory=LoggingConfig, description="Logging.")
    adapters: tuple[AdapterConfig, ...] = Field(
        default=(),
        description="Protocol adapters, each with a `type` and a unique `name`; see"
        " docs/adapters.md.",
    )
    bridges: tuple[BridgeConfig, ...] = Field(
        default=(), description="Bridges to remote MQTT brokers; see docs/bridges.md."
    )
    rules: tuple[RuleConfig, ...] = Field(
        default=(), description="SQL rules over the message stream; see docs/rules.md."
    )
    webhooks: tuple[WebhookConfig, ...] = Field(
        default=(), description="HTTP endpoints receiving broker events; see docs/webhooks.md."
    )
    stream: StreamConfig = Field(
        default_factory=StreamConfig, description="The stream log Spark reads; see docs/spark.md."
    )

    @field_validator("node_name")
    @classmethod
    def _usable_in_topics(cls, value: str) -> str:
        bad = sorted({char for char in value if char in "/+#\0"})
        if bad:
            shown = " ".join(repr(char) for char in bad)
            raise ValueError(f"must not contain {shown} (it is part of $SYS topics)")
        return value

    @field_validator("adapters", "bridges", "rules", "webhooks")
    @classmethod
    def _unique_names(cls, items: tuple[Any, ...], info: ValidationInfo) -> tuple[Any, ...]:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            first = seen.setdefault(item.name, index)
            if first != index:
                problems.append(
                    (
                        (index, "name"),
                        f"{item.name!r} is already the name of {info.field_name}[{first}]",
                    )
                )
        if problems:
            raise FieldProblems(problems)
        return items

    @field_validator("adapters", "bridges", "rules", "stream")
    @classmethod
    def _filters_within_max_topic_levels(cls, value: Any, info: ValidationInfo) -> Any:
        """The filters components subscribe to have at most ``mqtt.max_topic_levels``
        levels, as a client's SUBSCRIBE must (``topic_levels``). Not checked when
        ``mqtt`` itself has a problem (reported there)."""
        mqtt = info.data.get("mqtt")
        if not isinstance(mqtt, MqttConfig):
            return value
        max_levels = mqtt.max_topic_levels
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if info.field_name == "stream":
            if value.enabled:
                for index, topic_filter in enumerate(value.topics):
                    message = too_deep_message(topic_filter, max_levels)
                    if message is not None:
                        problems.append((("topics", index), message))
        else:
            assert info.field_name is not None
            for index, item in enumerate(value):
                found = component_filter_problems(info.field_name, item, max_levels)
                problems += [((index, *path), message) for path, message in found]
        if problems:
            raise FieldProblems(problems)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _what_rules_name_exists(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        try:
            config = handler(data)
        except ValidationError as exc:
            # another problem (a statement, a webhook's URL) keeps the sections from being
            # built: the valid actions are checked against the names as written, and so
            # are the names of the sections with problems and the adapters' addresses
            failed = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
            found = _references_as_written(data, info.context)
            if isinstance(data, Mapping):
                reported = _reported(exc)  # a section that failed only for its names
                found += [p for p in _names_as_written(data, failed) if p not in reported]
                if "listeners" in failed:
                    found += _api_collisions_as_written(data)
            found += _binds_as_written(data)
            raise with_problems(exc, found) from None
        problems = _binds_as_written(data)
        problems += check_rule_references(
            config.rules,
            config.webhooks,
            tuple(bridge.name for bridge in config.bridges),
            config.stream.enabled,
        )
        if problems:
            raise FieldProblems(problems)
        return config

    # The file checks run in field validators, not in an "after" model validator, so
    # that they report even when another section has a problem. Fields validate in
    # declaration order: `persistence` before `data_dir`, both before `api`.

    @field_validator("data_dir")
    @classmethod
    def _state_can_be_kept(cls, value: Path, info: ValidationInfo) -> Path:
        if checks_files(info.context) and info.data.get("persistence") == "sqlite":
            problem = data_dir_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("api")
    @classmethod
    def _port_free_and_key_can_be_kept(cls, api: ApiConfig, info: ValidationInfo) -> ApiConfig:
        listeners: tuple[ListenerConfig, ...] = info.data.get("listeners", ())
        problems = [(at[1:], message) for at, message in _api_collisions(api, listeners)]
        data_dir = info.data.get("data_dir")
        generated = api.enabled and not api.keys and not api.users
        if checks_files(info.context) and data_dir is not None and generated:
            problem = key_file_problem(api.key_file or default_key_file(data_dir))
            if problem is not None:
                at: tuple[str | int, ...] = ("key_file",) if api.key_file else ()
                problems.append((at, f"the API key file: {problem}"))
        if problems:
            raise FieldProblems(problems)
        return api

    @field_validator("listeners")
    @classmethod
    def _distinct_listeners(
        cls, listeners: tuple[ListenerConfig, ...]
    ) -> tuple[ListenerConfig, ...]:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        names: dict[str, int] = {}
        for index, listener in enumerate(listeners):
            first = names.setdefault(listener.name, index)
            if first != index:
                problems.append(
                    (
                        (index, "name"),
                        f"duplicate name {listener.name!r}"
                        f" (also {format_path(('listeners', first))})",
                    )
                )
            first = next(
                (i for i in range(index) if listeners[i].bind.overlaps(listener.bind)), index
            )
            if first != index:
                other = listeners[first].bind
                shown = "" if other == listener.bind else f" ({other})"
                problems.append(
                    (
                        (index, "bind"),
                        f"address {listener.bind} is already used by"
                        f" {format_path(('listeners', first))}{shown}",
                    )
                )
        if problems:
            raise FieldProblems(problems)
        return listeners
