"""``bridges``: connections to remote MQTT brokers (EMQX Cloud, AWS IoT Core, any MQTT).

A bridge is a local subscriber on its `forwards` filters, feeding a disk-backed queue
drained to the remote broker, and a remote subscriber on its `subscriptions`,
republishing locally with origin `bridge`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    SerializationInfo,
    field_serializer,
    model_validator,
)

from gateway.config.errors import FieldProblems
from gateway.config.models.adapter_base import check_filter_template, check_topic_template
from gateway.config.models.base import ConfigModel
from gateway.config.values import BindAddress, DurationSpec, HttpUrlSpec, PathSpec, SizeSpec

__all__ = [
    "AwsIotConfig",
    "BridgeConfig",
    "BridgeForward",
    "BridgeQueueConfig",
    "BridgeSubscription",
    "BridgeTlsConfig",
]

FilterTemplateText = Annotated[str, AfterValidator(check_filter_template)]
TopicTemplateText = Annotated[str, AfterValidator(check_topic_template)]


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
        default=1, description="QoS toward the remote broker (at most the message's QoS)."
    )
    retain: bool = Field(default=False, description="Keep the retain flag of local messages.")


class BridgeSubscription(ConfigModel):
    """Remote messages brought into the local broker."""

    remote: FilterTemplateText = Field(description="Remote filter template to subscribe to.")
    local: TopicTemplateText | None = Field(
        default=None, description="Local topic template; null: the remote topic unchanged."
    )
    qos: Literal[0, 1, 2] = Field(default=1, description="QoS of the remote subscription.")


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
    verify: bool = Field(default=True, description="Verify the server's certificate and name.")
    server_name: str | None = Field(
        default=None, description="Name to verify and send as SNI; null: the server's host."
    )
    alpn: tuple[str, ...] = Field(
        default=(),
        description="ALPN protocols, e.g. `[x-amzn-mqtt-ca]` for AWS IoT Core on port 443.",
    )

    @model_validator(mode="after")
    def _key_pair(self) -> Self:
        if (self.certfile is None) != (self.keyfile is None):
            missing = "keyfile" if self.keyfile is None else "certfile"
            raise FieldProblems([((missing,), "certfile and keyfile go together")])
        return self


class BridgeQueueConfig(ConfigModel):
    """The bridge's disk-backed store-and-forward queue."""

    max_messages: int = Field(default=1_000_000, ge=1, description="Messages held at most.")
    max_bytes: Annotated[int, SizeSpec()] = Field(
        default=1024**3, ge=1, description="Bytes of payload held at most."
    )
    overflow: Literal["drop_oldest", "drop_new"] = Field(
        default="drop_oldest",
        description="When full: drop the oldest queued message, or refuse the new one"
        " (counted either way).",
    )
    batch_size: int = Field(
        default=100, ge=1, le=65535, description="Messages sent per batch while draining."
    )


class AwsIotConfig(ConfigModel):
    """AWS IoT Core specifics (type `aws_iot`)."""

    region: str = Field(min_length=1, description="AWS region, e.g. `eu-central-1`.")
    thing_name: str | None = Field(
        default=None, description="The IoT thing; null: the bridge's `client_id`."
    )
    endpoint_url: Annotated[str, HttpUrlSpec()] | None = Field(
        default=None,
        description="AWS API endpoint for boto3 (discovering the data endpoint when"
        " `server` is null); null: AWS's own.",
    )


class BridgeConfig(ConfigModel):
    """One bridge to a remote MQTT broker."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
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
        default=None, description="Client id at the remote broker; null: `<node_name>-<name>`."
    )
    username: str | None = Field(default=None, description="User name at the remote broker.")
    password: SecretStr | None = Field(
        default=None, description="Password at the remote broker; write it as `${ENV_VAR}`."
    )
    keepalive: Annotated[float, DurationSpec()] = Field(
        default=60.0, gt=0, description="Keep alive toward the remote broker."
    )
    clean_start: bool = Field(
        default=False, description="Start a new remote session on every connect."
    )
    tls: BridgeTlsConfig | None = Field(default=None, description="TLS; null: plain TCP.")
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
    reconnect_backoff: Annotated[float, DurationSpec()] = Field(
        default=1.0, gt=0, description="First wait before reconnecting; doubles each time."
    )
    reconnect_backoff_max: Annotated[float, DurationSpec()] = Field(
        default=60.0, gt=0, description="Longest wait between reconnection attempts."
    )

    @field_serializer("password", when_used="json")
    def _secret(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        if value is None:
            return None
        if isinstance(info.context, dict) and info.context.get("reveal_secrets"):
            return value.get_secret_value()
        return str(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if not self.forwards and not self.subscriptions:
            problems.append((("forwards",), "a bridge needs `forwards` or `subscriptions`"))
        if self.server is None and not (self.type == "aws_iot" and self.aws is not None):
            problems.append((("server",), "missing required key 'server'"))
        if self.server is not None and self.server.port == 0:
            problems.append((("server",), "expected a port from 1 to 65535"))
        if self.aws is not None and self.type != "aws_iot":
            problems.append((("aws",), "only for `type: aws_iot`"))
        if self.type == "aws_iot" and (self.tls is None or self.tls.certfile is None):
            problems.append(
                (("tls",), "AWS IoT Core needs mutual TLS: set tls.certfile and keyfile")
            )
        if problems:
            raise FieldProblems(problems)
        return self

    def default_client_id(self, node_name: str) -> str:
        return self.client_id or f"{node_name}-{self.name}"

    def summary(self) -> dict[str, Any]:
        """What the API lists (no secrets)."""
        return {
            "name": self.name,
            "type": self.type,
            "enabled": self.enabled,
            "server": None if self.server is None else str(self.server),
            "forwards": [f.local for f in self.forwards],
            "subscriptions": [s.remote for s in self.subscriptions],
        }
