"""``bridges``: connections to remote MQTT brokers (EMQX Cloud, AWS IoT Core, any MQTT).

A bridge is a local subscriber on its `forwards` filters, feeding a disk-backed queue
drained to the remote broker, and a remote subscriber on its `subscriptions`,
republishing locally with origin `bridge` (docs/bridges.md).

The profiles are checked here, so that ``edgebus check`` finds what the remote broker
would refuse: AWS IoT Core's topic limits (``AWS_IOT_LIMITS``), its missing QoS 2
(``BridgeConfig.warnings``), EMQX Cloud's credentials.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    SerializationInfo,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from gateway.config.errors import FieldProblems
from gateway.config.files import checks_files, client_tls_file_problems
from gateway.config.introspect import Loc
from gateway.config.models.adapter_base import (
    check_filter_template,
    check_publish_topic_template,
    check_topic_template,
)
from gateway.config.models.base import (
    ConfigModel,
    doc_default,
    empty_means_none,
    show_secret,
    valid_as_written,
    valid_items,
)
from gateway.config.values import (
    BindAddress,
    DurationSpec,
    HttpUrlSpec,
    NameSpec,
    PathSpec,
    SizeSpec,
)
from gateway.mapping import FilterTemplate, TopicTemplate

__all__ = [
    "AWS_IOT_ALPN",
    "AWS_IOT_LIMITS",
    "AwsIotConfig",
    "AwsIotLimits",
    "BridgeConfig",
    "BridgeConnectProperties",
    "BridgeForward",
    "BridgeQueueConfig",
    "BridgeSubscription",
    "BridgeTlsConfig",
    "aws_topic_problem",
    "check_captures",
]

FilterTemplateText = Annotated[str, AfterValidator(check_filter_template)]
TopicTemplateText = Annotated[str, AfterValidator(check_topic_template)]
#: A topic the bridge publishes into the local broker: what the broker refuses of a topic
#: name (``$share/...``) is refused here too.
LocalTopicTemplateText = Annotated[str, AfterValidator(check_publish_topic_template)]

Problems = list[tuple[tuple[str | int, ...], str]]

#: The ALPN protocol AWS IoT Core expects for MQTT with a client certificate on port 443.
AWS_IOT_ALPN = "x-amzn-mqtt-ca"


@dataclass(frozen=True)
class AwsIotLimits:
    """AWS IoT Core's message broker limits (AWS IoT Core endpoints and quotas)."""

    topic_bytes: int = 256  # topic name or filter, UTF-8 bytes
    topic_slashes: int = 7  # forward slashes in a topic name or filter
    payload_bytes: int = 128 * 1024  # one message's payload
    client_id_bytes: int = 128
    subscriptions_per_connection: int = 50
    max_qos: int = 1  # AWS IoT Core has no QoS 2


AWS_IOT_LIMITS = AwsIotLimits()


def aws_topic_problem(topic: str, limits: AwsIotLimits = AWS_IOT_LIMITS) -> str | None:
    """Why AWS IoT Core would refuse ``topic`` (a name or filter), or None."""
    size = len(topic.encode())
    if size > limits.topic_bytes:
        return f"AWS IoT Core allows topics of {limits.topic_bytes} bytes at most, got {size}"
    slashes = topic.count("/")
    if slashes > limits.topic_slashes:
        return f"AWS IoT Core allows {limits.topic_slashes} '/' in a topic at most, got {slashes}"
    if topic.startswith("$") and not topic.startswith("$aws/"):
        return "AWS IoT Core reserves topics starting with '$' (except $aws/...)"
    return None


def _literal(template: str) -> str:
    """A template with every ``{field}`` reduced to one character: the shortest topic it
    can render, for limits that count bytes and slashes."""
    return re.sub(r"\{[^}]*\}", "x", template)


class BridgeForward(ConfigModel):
    """Local messages sent to the remote broker."""

    local: FilterTemplateText = Field(
        description="Local filter template; `{name}` captures one level, `{name#}` the rest"
        " (e.g. `vehicle/{vin}/{signal#}`)."
    )
    remote: TopicTemplateText | None = Field(
        default=None,
        description="Remote topic template using the captures (e.g."
        " `fleet/{vin}/{signal}`); null: the local topic unchanged.",
    )
    qos: Literal[0, 1, 2] = Field(
        default=1,
        description="QoS toward the remote broker, at most the message's own; QoS 1 and 2"
        " go through the disk queue (`aws_iot`: 2 is sent as 1).",
    )
    retain: bool = Field(default=False, description="Keep the retain flag of local messages.")

    @model_validator(mode="after")
    def _captures(self) -> Self:
        check_captures(self.local, self.remote, "local")
        return self

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        return _captures_as_written(data, failed, "local", "remote")


class BridgeSubscription(ConfigModel):
    """Remote messages brought into the local broker."""

    remote: FilterTemplateText = Field(description="Remote filter template to subscribe to.")
    local: LocalTopicTemplateText | None = Field(
        default=None, description="Local topic template; null: the remote topic unchanged."
    )
    qos: Literal[0, 1, 2] = Field(
        default=1,
        description="QoS of the remote subscription (`aws_iot`: 2 is asked as 1); a QoS 1/2"
        " message is acknowledged to the remote once it is safe locally.",
    )
    retain: bool = Field(
        default=False,
        description="Keep the retain flag of remote messages when republishing; on MQTT 5"
        " this also asks the remote for Retain As Published (unless `retain_as_published:"
        " false`), without which its live messages come without the flag. MQTT 3.1.1: only"
        " the messages retained when the bridge subscribes.",
    )
    no_local: bool = Field(
        default=True,
        description="MQTT 5: the remote broker does not send back what this bridge"
        " published itself.",
    )
    retain_as_published: bool | None = Field(
        default=None,
        description="MQTT 5: the remote keeps the retain flag as published; null: as `retain`.",
    )
    retain_handling: Literal[0, 1, 2] = Field(
        default=0,
        description="MQTT 5: retained messages on subscribe: 0 always, 1 only for a new"
        " subscription, 2 never.",
    )

    @model_validator(mode="after")
    def _captures(self) -> Self:
        check_captures(self.remote, self.local, "remote")
        return self

    def asks_retain_as_published(self) -> bool:
        """The Retain As Published option of the SUBSCRIBE (MQTT 5): as set, else `retain`."""
        if self.retain_as_published is None:
            return self.retain
        return self.retain_as_published

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        return _captures_as_written(data, failed, "remote", "local")


def _captures_as_written(
    data: Mapping[str, Any], failed: frozenset[str], side: str, other: str
) -> list[tuple[Loc, str]]:
    """``check_captures`` when another key (``qos``) has a problem."""
    filter_text, topic_text = data.get(side), data.get(other)
    if failed & {side, other} or not isinstance(filter_text, str):
        return []
    try:
        check_captures(filter_text, topic_text if isinstance(topic_text, str) else None, side)
    except ValueError as exc:
        return [((), str(exc))]
    return []


def check_captures(filter_text: str, topic_text: str | None, side: str) -> None:
    """Every ``{field}`` of the topic template must be a capture of the filter."""
    if topic_text is None:
        return
    try:
        captures = set(FilterTemplate(filter_text).captures)
        fields = TopicTemplate(topic_text).fields
    except ValueError:
        return  # reported by the fields' own validators
    missing = [name for name in fields if name not in captures]
    if missing:
        names = ", ".join(f"{{{name}}}" for name in missing)
        raise ValueError(f"{names} is not captured by the `{side}` filter {filter_text!r}")


class BridgeTlsConfig(ConfigModel):
    """TLS toward the remote broker."""

    cafile: Annotated[Path, PathSpec()] | None = Field(
        default=None, description="CA bundle to verify the server; null: the system's CAs."
    )
    certfile: Annotated[Path, PathSpec()] | None = Field(
        default=None, description="Client certificate (mutual TLS, e.g. AWS IoT Core)."
    )
    keyfile: Annotated[Path, PathSpec()] | None = Field(
        default=None, description="Private key of `certfile`."
    )
    keyfile_password: SecretStr | None = Field(
        default=None,
        description="Password of an encrypted `keyfile` (empty = none); write it as"
        " `${ENV_VAR}`, not in clear.",
    )
    crlfile: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="PEM file of certificate revocation lists (X509 CRL) the server's"
        " certificate is checked against (with `verify`): a revoked one is refused. The"
        " CA that issued the server's certificate needs a CRL in it. Read with each"
        " connection (docs/bridges.md).",
    )
    verify: bool = Field(default=True, description="Verify the server's certificate and name.")
    server_name: str | None = Field(
        default=None, description="Name to verify and send as SNI; null: the server's host."
    )
    alpn: tuple[str, ...] = Field(
        default=(),
        description="ALPN protocols, e.g. `[x-amzn-mqtt-ca]` for AWS IoT Core on port 443.",
    )

    _empty_password_means_none = field_validator("keyfile_password", mode="before")(
        empty_means_none
    )

    @field_serializer("keyfile_password", when_used="json")
    def _secret(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        return show_secret(value, info)

    def key_password(self) -> str | None:
        """``keyfile_password`` in clear, or None."""
        return None if self.keyfile_password is None else self.keyfile_password.get_secret_value()

    @model_validator(mode="after")
    def _key_pair_and_files(self, info: ValidationInfo) -> Self:
        problems = _tls_problems(
            self.cafile,
            self.certfile,
            self.keyfile,
            self.keyfile_password,
            info.context,
            self.crlfile,
        )
        if self.crlfile is not None and not self.verify:
            problems.append((("crlfile",), "only works with 'verify: true'"))
        if problems:
            raise FieldProblems(problems)
        return self

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> Problems:
        """The key pair and the files, when a key that does not name them (``verify``,
        ``alpn``) has a problem."""
        keys = ("cafile", "certfile", "keyfile", "keyfile_password", "crlfile")
        if failed & set(keys):
            return []
        try:
            cafile, certfile, keyfile, password, crlfile = (
                valid_as_written(cls, key, data, context) for key in keys
            )
        except ValidationError:
            return []
        return _tls_problems(cafile, certfile, keyfile, password, context, crlfile)


def _tls_problems(
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    password: SecretStr | None,
    context: Any,
    crlfile: Path | None = None,
) -> Problems:
    """``BridgeTlsConfig``'s checks between keys: the key pair, and (``edgebus check``,
    ``run``) its files."""
    problems: Problems = []
    if (certfile is None) != (keyfile is None):
        missing = "keyfile" if keyfile is None else "certfile"
        problems.append(((missing,), "certfile and keyfile go together"))
    if checks_files(context):
        secret = (None if password is None else password.get_secret_value()) or None
        found = client_tls_file_problems(cafile, certfile, keyfile, secret, crlfile)
        problems += [((option,), message) for option, message in found]
    return problems


class BridgeQueueConfig(ConfigModel):
    """The bridge's disk-backed store-and-forward queue."""

    max_messages: int = Field(default=1_000_000, ge=1, description="Messages held at most.")
    max_bytes: Annotated[int, SizeSpec(ge=1)] = Field(
        default=1024**3,
        description="Bytes held at most, counting each queued message's remote topic and payload.",
    )
    overflow: Literal["drop_oldest", "drop_new"] = Field(
        default="drop_oldest",
        description="When full: drop the oldest queued message, or refuse the new one"
        " (counted either way).",
    )
    batch_size: int = Field(
        default=500,
        ge=1,
        le=65535,
        description="Messages read from disk per batch while a backlog drains.",
    )
    qos0: bool = Field(
        default=False,
        description="Queue QoS 0 messages on disk too while the link is down (or a backlog"
        " drains); false: they are sent when the link is up and dropped (counted) otherwise.",
    )
    rate_limit: float | None = Field(
        default=None,
        gt=0,
        description="Messages sent to the remote per second at most (token bucket of one"
        " second); null = as fast as the inflight window allows.",
    )


class BridgeConnectProperties(ConfigModel):
    """MQTT 5 CONNECT properties sent to the remote broker (`protocol_version: 5`)."""

    session_expiry_interval: Annotated[float, DurationSpec(le=4294967295, whole_seconds=True)] = (
        Field(
            default=0.0,
            description="How long the remote keeps this bridge's session (its subscriptions and"
            " the QoS 1/2 messages queued for it) after a disconnect; 0: it ends with the"
            " connection. Use it with `clean_start: false`.",
        )
    )
    receive_maximum: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="QoS 1/2 messages the remote may have in flight to this bridge; null: 65535.",
    )
    maximum_packet_size: Annotated[int, SizeSpec(ge=16, le=268435460)] | None = Field(
        default=None, description="Largest packet the remote may send; null: no limit."
    )
    topic_alias_maximum: int = Field(
        default=0, ge=0, le=65535, description="Topic aliases the remote may use toward us."
    )
    request_response_information: bool = Field(
        default=False, description="Ask the remote for response information in CONNACK."
    )
    request_problem_information: bool = Field(
        default=True, description="Let the remote send reason strings and user properties."
    )
    user_properties: dict[str, str] = Field(
        default_factory=dict, description="User properties sent with CONNECT."
    )


class AwsIotConfig(ConfigModel):
    """AWS IoT Core specifics (type `aws_iot`)."""

    region: str = Field(min_length=1, description="AWS region, e.g. `eu-central-1`.")
    thing_name: str | None = Field(
        default=None,
        description="The IoT thing; it is the client id unless `client_id` is set; null: the"
        " bridge's `client_id`.",
    )
    endpoint_url: Annotated[str, HttpUrlSpec()] | None = Field(
        default=None,
        description="AWS API endpoint for boto3 (discovering the data endpoint when"
        " `server` is null); null: AWS's own.",
    )


class BridgeConfig(ConfigModel):
    """One bridge to a remote MQTT broker."""

    name: Annotated[str, NameSpec()] = Field(
        description="Unique name; the ACL knows it as `clientid: bridge:<name>`.",
    )
    type: Literal["mqtt", "emqx_cloud", "aws_iot"] = Field(
        default="mqtt", description="Profile: any MQTT broker, EMQX Cloud, or AWS IoT Core."
    )
    enabled: bool = Field(default=True, description="Start this bridge with the gateway.")
    server: BindAddress | None = Field(
        default=None,
        description="Remote `host:port`; may be null only for `aws_iot` with `aws` (the"
        " endpoint is discovered).",
    )
    protocol_version: Literal["3.1.1", "5"] = Field(
        default="5", description="MQTT version spoken to the remote broker."
    )
    client_id: str | None = Field(
        default=None,
        description="Client id at the remote broker; null: `aws.thing_name` for `aws_iot`,"
        " else `<node_name>-<name>`.",
    )
    username: str | None = Field(default=None, description="User name at the remote broker.")
    password: SecretStr | None = Field(
        default=None, description="Password at the remote broker; write it as `${ENV_VAR}`."
    )
    keepalive: Annotated[float, DurationSpec(ge=1, le=65535, whole_seconds=True)] = Field(
        default=60.0,
        description="Keep alive toward the remote broker; a link silent for that long is"
        " probed with PINGREQ and given up when the probe is not answered in time.",
    )
    clean_start: bool = Field(
        default=False, description="Start a new remote session on every connect."
    )
    connect_timeout: Annotated[float, DurationSpec(gt=0)] = Field(
        default=10.0, description="Longest wait for TCP, TLS and the CONNACK."
    )
    connect_properties: BridgeConnectProperties = Field(
        default_factory=BridgeConnectProperties,
        description="MQTT 5 CONNECT properties (`protocol_version: 5` only).",
    )
    max_inflight: int = Field(
        default=100,
        ge=1,
        le=65000,
        description="The inflight window: QoS 1/2 messages sent and not yet acknowledged,"
        " at most (and at most the remote's Receive Maximum); after a restart at most"
        " this many are sent again, with DUP set. On an MQTT 3.1.1 link at most 20 QoS 2"
        " messages are in flight, and no QoS 1 is sent while 20 are (mosquitto's limit).",
    )
    tls: BridgeTlsConfig | None = Field(
        default=None,
        description="TLS; null: plain TCP (`emqx_cloud` and `aws_iot`: TLS with the system's CAs).",
        json_schema_extra=doc_default("null: plain TCP; `emqx_cloud`, `aws_iot`: TLS"),
    )
    aws: AwsIotConfig | None = Field(default=None, description="AWS IoT Core settings.")
    forwards: tuple[BridgeForward, ...] = Field(
        default=(), description="Local messages forwarded to the remote broker."
    )
    subscriptions: tuple[BridgeSubscription, ...] = Field(
        default=(), description="Remote messages brought in."
    )
    queue: BridgeQueueConfig = Field(
        default_factory=BridgeQueueConfig, description="Store-and-forward queue."
    )
    reconnect_backoff: Annotated[float, DurationSpec(gt=0)] = Field(
        default=1.0,
        description="First wait before reconnecting; doubles after each failed attempt, back"
        " to this once connected.",
    )
    reconnect_backoff_max: Annotated[float, DurationSpec(gt=0)] = Field(
        default=60.0,
        description="Longest wait between reconnection attempts; at least `reconnect_backoff`.",
    )
    reconnect_jitter: float = Field(
        default=0.2,
        ge=0,
        lt=1,
        description="Each wait is stretched or shrunk by up to this fraction at random, so"
        " that many gateways do not reconnect in step.",
    )
    restart_backoff: Annotated[float, DurationSpec()] = Field(
        default=1.0,
        description="First wait before restarting a failed bridge (its queue cannot open,"
        " ...); doubles up to `restart_backoff_max`.",
    )
    restart_backoff_max: Annotated[float, DurationSpec()] = Field(
        default=60.0,
        description="Longest wait between restarts of a failing bridge; at least"
        " `restart_backoff`.",
    )

    @field_serializer("password", when_used="json")
    def _secret(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        return show_secret(value, info)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = _between_keys(
            {
                "type": self.type,
                "server": self.server,
                "forwards": self.forwards,
                "subscriptions": self.subscriptions,
                "aws": self.aws is not None,
                "thing_name": self.aws.thing_name if self.aws is not None else None,
                "tls.certfile": self.tls is not None and self.tls.certfile is not None,
                "username": self.username,
                "client_id": self.client_id,
                "protocol_version": self.protocol_version,
                "connect_properties": self.connect_properties != BridgeConnectProperties(),
            }
        )
        if problems:
            raise FieldProblems(problems)
        return self

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> Problems:
        """``_consistent`` when some key has a problem of its own: each check whose keys
        are valid (or, for a section with a problem, at least given), on ``data`` as
        written, so that ``edgebus check`` reports them with the bad key in one run."""
        return _between_keys(_facts_as_written(data, failed, context))

    def warnings(self) -> list[tuple[tuple[str | int, ...], str]]:
        """What runs, but not as written: (YAML path below this bridge, message)."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        if self.type == "aws_iot":
            sections: tuple[tuple[str, tuple[BridgeForward | BridgeSubscription, ...]], ...] = (
                ("forwards", self.forwards),
                ("subscriptions", self.subscriptions),
            )
            for section, items in sections:
                for index, item in enumerate(items):
                    if item.qos == 2:
                        found.append(
                            (
                                (section, index, "qos"),
                                "AWS IoT Core has no QoS 2: QoS 1 is used",
                            )
                        )
        if self.protocol_version != "5":
            for index, subscription in enumerate(self.subscriptions):
                given = subscription.model_fields_set
                for key in ("no_local", "retain_as_published", "retain_handling"):
                    if key in given:
                        found.append(
                            (
                                ("subscriptions", index, key),
                                "MQTT 5 only (protocol_version: 5): ignored on MQTT 3.1.1",
                            )
                        )
                if subscription.retain:
                    found.append(
                        (
                            ("subscriptions", index, "retain"),
                            "on MQTT 3.1.1 the remote clears the retain flag of live messages:"
                            " only those retained when the bridge subscribes are kept"
                            " (protocol_version: 5 keeps them all)",
                        )
                    )
        return found

    def max_qos(self) -> int:
        """The highest QoS the remote broker takes (AWS IoT Core: 1)."""
        return AWS_IOT_LIMITS.max_qos if self.type == "aws_iot" else 2

    def default_client_id(self, node_name: str) -> str:
        if self.client_id:
            return self.client_id
        if self.aws is not None and self.aws.thing_name:
            return self.aws.thing_name
        return f"{node_name}-{self.name}"

    def uses_tls(self) -> bool:
        """TLS toward the remote: configured, or by profile (EMQX Cloud, AWS IoT Core)."""
        return self.tls is not None or self.type in ("emqx_cloud", "aws_iot")

    def alpn(self) -> tuple[str, ...]:
        """ALPN protocols to offer: configured, or AWS IoT Core's on port 443."""
        if self.tls is not None and self.tls.alpn:
            return self.tls.alpn
        port = self.server.port if self.server is not None else 443
        return (AWS_IOT_ALPN,) if self.type == "aws_iot" and port == 443 else ()

    def summary(self) -> dict[str, Any]:
        """What the API lists (no secrets)."""
        return {
            "name": self.name,
            "type": self.type,
            "enabled": self.enabled,
            "server": None if self.server is None else str(self.server),
            "forwards": [f.local for f in self.forwards],
            "subscriptions": [s.remote for s in self.subscriptions],
            "protocol_version": self.protocol_version,
            "tls": self.uses_tls(),
        }


def _between_keys(facts: Mapping[str, Any]) -> Problems:
    """The checks between a bridge's keys, on ``facts``: key -> its valid value, except
    ``aws``, ``tls.certfile`` and ``connect_properties``: whether each is given (set, not
    the defaults); ``forwards`` and ``subscriptions`` may hold None for an entry with a
    problem of its own. A key missing from ``facts`` has a problem of its own that leaves
    it unknown, and the checks that need it are left out."""

    def known(*keys: str) -> bool:
        return all(key in facts for key in keys)

    problems: Problems = []
    if known("forwards", "subscriptions") and not facts["forwards"] and not facts["subscriptions"]:
        problems.append((("forwards",), "a bridge needs `forwards` or `subscriptions`"))
    server = facts.get("server", _UNKNOWN)
    if (
        server is None
        and known("type", "aws")
        and not (facts["type"] == "aws_iot" and facts["aws"])
    ):
        problems.append(((), "missing required key 'server'"))
    if isinstance(server, BindAddress) and server.port == 0:
        problems.append((("server",), "expected a port from 1 to 65535"))
    kind = facts.get("type", _UNKNOWN)
    if facts.get("aws") and known("type") and kind != "aws_iot":
        problems.append((("aws",), "only for `type: aws_iot`"))
    if kind == "aws_iot" and known("tls.certfile") and not facts["tls.certfile"]:
        problems.append((("tls",), "AWS IoT Core needs mutual TLS: set tls.certfile and keyfile"))
    if kind == "aws_iot":
        problems += _aws_problems(facts)
    if (
        kind == "emqx_cloud"
        and known("username", "tls.certfile")
        and not (facts["username"] or facts["tls.certfile"])
    ):
        problems.append(
            (("username",), "EMQX Cloud needs a username and password (or tls.certfile)")
        )
    if (
        known("protocol_version", "connect_properties")
        and facts["protocol_version"] != "5"
        and facts["connect_properties"]
    ):
        problems.append((("connect_properties",), "MQTT 5 only (protocol_version: 5)"))
    return problems


def _aws_problems(facts: Mapping[str, Any]) -> Problems:
    """AWS IoT Core's limits on the topics, subscriptions and client id in ``facts``."""
    limits = AWS_IOT_LIMITS
    problems: Problems = []
    forwards: tuple[BridgeForward | None, ...] = facts.get("forwards", ())
    for index, forward in enumerate(forwards):
        if forward is None:
            continue
        where, text = ("remote",), forward.remote
        if text is None:
            where, text = ("local",), forward.local
        problem = aws_topic_problem(_literal(text).replace("+", "x").replace("#", "x"))
        if problem is not None:
            problems.append((("forwards", index, *where), problem))
    subscriptions: tuple[BridgeSubscription | None, ...] = facts.get("subscriptions", ())
    for index, subscription in enumerate(subscriptions):
        if subscription is None:
            continue
        problem = aws_topic_problem(FilterTemplate(subscription.remote).topic_filter)
        if problem is not None:
            problems.append((("subscriptions", index, "remote"), problem))
    if len(subscriptions) > limits.subscriptions_per_connection:
        problems.append(
            (
                ("subscriptions",),
                f"AWS IoT Core allows {limits.subscriptions_per_connection} subscriptions"
                " per connection",
            )
        )
    client_id = facts.get("client_id", _UNKNOWN) or facts.get("thing_name")
    if isinstance(client_id, str) and len(client_id.encode()) > limits.client_id_bytes:
        problems.append(
            (
                ("client_id",),
                f"AWS IoT Core allows client ids of {limits.client_id_bytes} bytes at most",
            )
        )
    return problems


#: A key of ``_between_keys``'s facts that is not there.
_UNKNOWN = object()

#: Keys ``_between_keys`` reads with their valid value.
_PLAIN_KEYS = ("type", "server", "username", "client_id", "protocol_version")


def _facts_as_written(
    data: Mapping[str, Any], failed: frozenset[str], context: Any
) -> dict[str, Any]:
    """``_between_keys``'s facts from a bridge as written, whose keys in ``failed`` have
    problems of their own: what can still be known of them (a section with a problem is
    at least given; its entries without problems are valid)."""
    facts: dict[str, Any] = {}
    for key in _PLAIN_KEYS:
        if key in failed:
            continue
        try:
            facts[key] = valid_as_written(BridgeConfig, key, data, context)
        except ValidationError:
            continue
    for key, model in (("forwards", BridgeForward), ("subscriptions", BridgeSubscription)):
        items = data.get(key)
        if items is None:
            facts[key] = ()
        elif isinstance(items, list | tuple):
            facts[key] = tuple(valid_items(model, items, context))
    aws = data.get("aws")
    facts["aws"] = aws is not None
    if aws is None:
        facts["thing_name"] = None
    elif isinstance(aws, Mapping) and isinstance(aws.get("thing_name"), str | None):
        facts["thing_name"] = aws.get("thing_name")
    tls = data.get("tls")
    if tls is None or isinstance(tls, Mapping):
        facts["tls.certfile"] = tls is not None and tls.get("certfile") is not None
    properties = data.get("connect_properties")
    if properties is None:
        facts["connect_properties"] = False
    elif "connect_properties" not in failed:
        try:
            given = BridgeConnectProperties.model_validate(properties, context=context)
        except ValidationError:
            return facts
        facts["connect_properties"] = given != BridgeConnectProperties()
    elif isinstance(properties, Mapping):
        facts["connect_properties"] = bool(properties)  # given with a problem: not the defaults
    return facts
