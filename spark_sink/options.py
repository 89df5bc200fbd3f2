"""The options of the ``edgebus`` Spark source, read and checked once (pure).

========================  ===========  ================================================
option                    default      meaning
========================  ===========  ================================================
``gateway``               (required)   the gateway's HTTP API, ``http://host:8081``
``apiKey``                -            an API key (``api.keys``) ...
``username``/``password`` -            ... or a user of ``api.users``
``topic``                 ``#``        a topic filter, applied by the gateway
``startingOffsets``       ``earliest`` streaming: where a new query starts: ``earliest``,
                                       ``latest`` or an offset
``maxRowsPerBatch``       -            streaming: most offsets per micro-batch (before
                                       the topic filter)
``startOffset``           earliest     batch reads: first offset
``endOffset``             latest       batch reads: offset after the last
``partitionRows``         ``100000``   offsets per Spark partition (task)
``failOnDataLoss``        ``true``     fail when retention deleted records before Spark
                                       read them; ``false``: warn and go on
``timeout``               ``60``       seconds an HTTP request may take
========================  ===========  ================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["OptionError", "SourceOptions"]


class OptionError(ValueError):
    """An option of the ``edgebus`` source is missing or wrong."""


def _int(options: Mapping[str, str], name: str, minimum: int) -> int | None:
    text = options.get(name.lower())
    if text is None or str(text).strip() == "":
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"option {name}: expected an integer, got {text!r}") from None
    if value < minimum:
        raise OptionError(f"option {name}: expected at least {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name}: expected true or false, got {text!r}")


@dataclass(frozen=True)
class SourceOptions:
    gateway: str
    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    topic: str = "#"
    starting: str | int = "earliest"
    max_rows_per_batch: int | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    partition_rows: int = 100_000
    fail_on_data_loss: bool = True
    timeout_s: float = 60.0

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """The options Spark passes (a case-insensitive mapping, or lowercase keys)."""
        lowered = {str(key).lower(): value for key, value in options.items()}
        gateway = lowered.get("gateway")
        if not gateway:
            raise OptionError("option gateway: required, the gateway's API: http://host:8081")
        starting: str | int = str(lowered.get("startingoffsets", "earliest")).strip().lower()
        if starting not in ("earliest", "latest"):
            parsed = _int(lowered, "startingOffsets", 0)
            if parsed is None:
                raise OptionError("option startingOffsets: earliest, latest or an offset")
            starting = parsed
        topic = str(lowered.get("topic") or "#")
        timeout = _int(lowered, "timeout", 1)
        return cls(
            gateway=str(gateway),
            api_key=lowered.get("apikey"),
            username=lowered.get("username"),
            password=lowered.get("password"),
            topic=topic,
            starting=starting,
            max_rows_per_batch=_int(lowered, "maxRowsPerBatch", 1),
            start_offset=_int(lowered, "startOffset", 0),
            end_offset=_int(lowered, "endOffset", 0),
            partition_rows=_int(lowered, "partitionRows", 1) or 100_000,
            fail_on_data_loss=_bool(lowered, "failOnDataLoss", True),
            timeout_s=float(timeout or 60),
        )
