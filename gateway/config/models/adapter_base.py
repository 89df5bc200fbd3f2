"""What every adapter's configuration has: ``type``, ``name``, supervision settings.

Each adapter type's model (``adapters/<type>/config.py``) subclasses
``AdapterConfigBase`` and narrows ``type`` to its own literal.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from broker_core.mqtt.topics import SHARE_PREFIX, topic_name_problem
from gateway.config.models.base import ConfigModel
from gateway.config.values import DurationSpec, NameSpec
from gateway.mapping import FilterTemplate, TopicTemplate, codec

__all__ = [
    "AdapterConfigBase",
    "check_codec",
    "check_filter_template",
    "check_publish_topic_template",
    "check_topic_template",
]


class AdapterConfigBase(ConfigModel):
    name: Annotated[str, NameSpec()] = Field(
        description="Unique name of this adapter instance; the ACL knows it as"
        " `clientid: <type>:<name>`; metrics and the API by this name."
    )
    enabled: bool = Field(default=True, description="Start this adapter with the gateway.")
    restart_backoff: Annotated[float, DurationSpec()] = Field(
        default=1.0,
        description="First wait before restarting a failed adapter; doubles up to"
        " `restart_backoff_max`.",
    )
    restart_backoff_max: Annotated[float, DurationSpec()] = Field(
        default=60.0,
        description="Longest wait between restarts of a failing adapter; at least"
        " `restart_backoff`.",
    )
    queue_size: int = Field(
        default=10_000,
        ge=1,
        description="Messages each outbound subscription of this adapter buffers; when full"
        " the oldest is dropped (counted in the metrics).",
    )


def check_topic_template(value: Any) -> Any:
    if isinstance(value, str):
        TopicTemplate(value)
    return value


def check_publish_topic_template(value: Any) -> Any:
    """A template of the topic name of a message the gateway publishes into its broker:
    ``check_topic_template``, and what the broker refuses of a topic name
    (``topic_name_problem``: ``$share/...``, NUL, size) as far as the template shows
    it: the whole text without fields, else its text before the first field."""
    if isinstance(value, str):
        fields = TopicTemplate(value).fields
        if not fields:
            problem = topic_name_problem(value)
        elif value.startswith(SHARE_PREFIX):
            problem = topic_name_problem(SHARE_PREFIX)
        elif "\0" in value:
            problem = topic_name_problem("\0")
        else:
            problem = None
        if problem is not None:
            raise ValueError(f"{problem}: {value!r}")
    return value


def check_filter_template(value: Any) -> Any:
    if isinstance(value, str):
        FilterTemplate(value)
    return value


def check_codec(value: Any) -> Any:
    if isinstance(value, str):
        codec(value)
    return value
