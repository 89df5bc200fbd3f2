"""``sys`` and ``logging``: what the broker says about itself."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from gateway.config.models.base import ConfigModel
from gateway.config.values import DurationSpec

__all__ = ["LoggingConfig", "SysConfig"]


class SysConfig(ConfigModel):
    """`$SYS` topics: broker statistics and client events."""

    interval: Annotated[float, DurationSpec()] = Field(
        default=10.0,
        description="How often statistics are published under `$SYS/`; 0 disables them.",
    )
    events: bool = Field(
        default=True,
        description="Publish an event when a client connects or disconnects, and the events"
        " of components (a bridge connecting or losing its remote broker).",
    )


class LoggingConfig(ConfigModel):
    """Log output (the CLI installs the handler)."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Least severe level logged (case-insensitive)."
    )
    format: Literal["text", "json"] = Field(
        default="text", description="`text` lines for people, or one JSON object per line."
    )

    @field_validator("level", mode="before")
    @classmethod
    def _level_lower(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lower() in ("debug", "info", "warning", "error"):
            return value.lower()
        return value
