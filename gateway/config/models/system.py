"""``sys`` and ``logging``: what the broker says about itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from gateway.config.files import checks_files, log_file_problem
from gateway.config.models.base import ConfigModel
from gateway.config.values import DurationSpec, PathSpec, SizeSpec

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
    """Log output (the CLI installs the handler): standard error by default, where
    systemd's journal collects it, or a file that edgebus rotates itself."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Least severe level logged (case-insensitive)."
    )
    format: Literal["text", "json"] = Field(
        default="text",
        description="`text` lines for people, or `json`: one JSON object per line with"
        " `time` (UTC, ISO 8601), `level`, `logger`, `message`, `client_id` when the line is"
        " about one MQTT client, and `exception` when there is one.",
    )
    file: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="Write the log to this file instead of standard error; its directory"
        " must exist. null = standard error.",
    )
    max_size: Annotated[int, SizeSpec()] = Field(
        default=10_000_000,
        description="With `file`: rotate it when it reaches this size (`edgebus.log` becomes"
        " `edgebus.log.1`, ...). 0 = never; the file is then reopened when an outside tool"
        " such as logrotate moves it.",
    )
    backups: int = Field(
        default=5, ge=1, description="With `file` and `max_size`: rotated files kept."
    )

    @field_validator("file")
    @classmethod
    def _writable(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and checks_files(info.context):
            problem = log_file_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("level", mode="before")
    @classmethod
    def _level_lower(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lower() in ("debug", "info", "warning", "error"):
            return value.lower()
        return value
