"""Configuration of the ``loopback`` adapter."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator

from gateway.config.models.adapter_base import (
    AdapterConfigBase,
    check_codec,
    check_filter_template,
    check_publish_topic_template,
)
from gateway.config.models.base import ConfigModel
from gateway.config.models.bridges import check_captures
from gateway.mapping import TopicTemplate

__all__ = ["LoopbackAdapterConfig", "LoopbackMapping"]


class LoopbackMapping(ConfigModel):
    """Messages matching `source` are republished to `target`."""

    source: Annotated[str, AfterValidator(check_filter_template)] = Field(
        description="Filter template to subscribe to; `{name}` captures one level and"
        " `{name#}` the remaining ones (e.g. `sensors/{room}/{rest#}`)."
    )
    target: Annotated[str, AfterValidator(check_publish_topic_template)] = Field(
        description="Topic template to publish to, using the captures (e.g."
        " `building/{room}/{rest}`) and `payload.` fields of a JSON payload."
    )
    qos: Literal[0, 1, 2] = Field(
        default=1,
        description="QoS of the subscription and of the republished messages (at most the"
        " received QoS).",
    )
    decode: Annotated[str, AfterValidator(check_codec)] = Field(
        default="raw",
        description="Codec reading the source payload (`raw`, `json`, `base64`, `hex`).",
    )
    encode: Annotated[str, AfterValidator(check_codec)] = Field(
        default="raw", description="Codec writing the target payload; sets its content type."
    )
    retain: bool = Field(default=False, description="Republish with the retain flag kept.")

    @model_validator(mode="after")
    def _captures(self) -> Self:
        """Every ``{field}`` of ``target`` but the ``payload.``/``key.`` ones must be a
        capture of ``source``: the bridges' check, over those fields."""
        named = [
            field
            for field in TopicTemplate(self.target).fields
            if not field.startswith(("payload.", "key."))
        ]
        check_captures(self.source, "/".join(f"{{{f}}}" for f in named) or None, "source")
        return self


class LoopbackAdapterConfig(AdapterConfigBase):
    """The `loopback` adapter: republishes between topic spaces inside the broker."""

    type: Literal["loopback"] = Field(description="Adapter type.")
    mappings: tuple[LoopbackMapping, ...] = Field(
        min_length=1, description="What to republish where."
    )
