"""``stream``: the durable stream log that Apache Spark reads with replayable offsets.

The log itself lives in ``spark_sink/`` (the ``stream`` sink component); this is its
configuration, validated when the file is loaded. See docs/spark.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from gateway.config.errors import FieldProblems
from gateway.config.models.base import ConfigModel
from gateway.config.units import format_size
from gateway.config.values import DurationSpec, PathSpec, SizeSpec, TopicFilterSpec

__all__ = ["KNOWN_ORIGINS", "FsyncPolicy", "StreamConfig"]

#: The protocols of the origins edgebus itself gives messages; adapter types registered
#: at run time (``loopback``, ...) are accepted too.
KNOWN_ORIGINS = ("mqtt", "dds", "ros2", "zmq", "nng", "someip", "bridge", "rule", "api")

FsyncPolicy = Literal["always", "interval", "never"]

_PROTOCOL = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def _check_origin(origin: str) -> str:
    from gateway.components import registry  # imports no component

    adapters = {entry.origin_protocol for entry in registry.types_of(registry.ADAPTER)}
    known = set(KNOWN_ORIGINS) | adapters
    if not _PROTOCOL.match(origin) or origin not in known:
        raise ValueError(
            f"expected an origin protocol ({', '.join(sorted(known))}), got {origin!r}"
        )
    return origin


class StreamConfig(ConfigModel):
    """The stream log: messages appended with a global offset, kept for Spark."""

    enabled: bool = Field(default=False, description="Record messages into the stream log.")
    topics: tuple[Annotated[str, TopicFilterSpec()], ...] = Field(
        default=("#",), min_length=1, description="Topic filters of the messages recorded."
    )
    origins: tuple[Annotated[str, AfterValidator(_check_origin)], ...] | None = Field(
        default=None,
        min_length=1,
        description="Origin protocols recorded (`mqtt`, `dds`, `ros2`, `zmq`, `nng`, `someip`,"
        " `bridge`, `rule`, `api`, or an adapter type such as `loopback`); null: every origin.",
    )
    path: Annotated[Path, PathSpec()] | None = Field(
        default=None, description="Directory of the log; null: `<data_dir>/sink/stream`."
    )
    retention: Annotated[float, DurationSpec(gt=0)] = Field(
        default=7 * 24 * 3600.0, description="How long records are kept."
    )
    max_bytes: Annotated[int, SizeSpec(ge=4096)] = Field(
        default=1024**3,
        description="Most bytes kept; the oldest segments go first (at least `segment_bytes`).",
    )
    segment_bytes: Annotated[int, SizeSpec(ge=4096)] = Field(
        default=64 * 1024**2, description="Size of one log segment file."
    )
    fsync: FsyncPolicy = Field(
        default="always",
        description="`always`: a message is acknowledged once its batch is written and"
        " fsync-ed (survives a power loss); `interval`: fsync every `fsync_interval`, acknowledged"
        " once written (survives a crash of the process, not of the machine); `never`: the"
        " operating system decides.",
    )
    fsync_interval: Annotated[float, DurationSpec(gt=0)] = Field(
        default=1.0, description="Time between fsyncs with `fsync: interval`."
    )
    queue_size: int = Field(
        default=100_000,
        ge=1,
        description="Messages handed to the log's writer and not yet written; QoS 0 messages"
        " arriving beyond it are not recorded (counted as `dropped`). QoS 1 and 2 messages"
        " always are: their publishers wait for the log.",
    )

    @model_validator(mode="after")
    def _sizes(self) -> StreamConfig:
        if self.max_bytes < self.segment_bytes:
            # at the key written (max_bytes when both are)
            key = "max_bytes" if "max_bytes" in self.model_fields_set else "segment_bytes"
            raise FieldProblems(
                [
                    (
                        (key,),
                        f"max_bytes ({format_size(self.max_bytes)}) must be at least"
                        f" segment_bytes ({format_size(self.segment_bytes)})",
                    )
                ]
            )
        return self
