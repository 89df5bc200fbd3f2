"""``stream``: the durable stream log that Apache Spark reads with replayable offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from gateway.config.models.base import ConfigModel
from gateway.config.values import DurationSpec, PathSpec, SizeSpec, TopicFilterSpec

__all__ = ["StreamConfig"]


class StreamConfig(ConfigModel):
    """The stream log: messages appended with a global offset, kept for Spark."""

    enabled: bool = Field(default=False, description="Record messages into the stream log.")
    topics: tuple[Annotated[str, TopicFilterSpec()], ...] = Field(
        default=("#",), min_length=1, description="Topic filters of the messages recorded."
    )
    path: Annotated[Path, PathSpec()] | None = Field(
        default=None, description="Directory of the log; null: `<data_dir>/stream`."
    )
    retention: Annotated[float, DurationSpec()] = Field(
        default=7 * 24 * 3600.0, gt=0, description="How long records are kept."
    )
    max_bytes: Annotated[int, SizeSpec()] = Field(
        default=1024**3, ge=1, description="Most bytes kept; the oldest segments go first."
    )
    segment_bytes: Annotated[int, SizeSpec()] = Field(
        default=64 * 1024**2, ge=4096, description="Size of one log segment file."
    )
