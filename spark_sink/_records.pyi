"""Types of the compiled encoder (spark_sink/_records.pyx): ``records.encode_columns``."""

from collections.abc import Sequence

from broker_core.context import Context
from spark_sink.records import Encoded

__all__ = ["API", "encode_columns", "reads_slots"]

API: int

def encode_columns(
    contexts: Sequence[Context],
    topics: list[str] | None = None,
    joined: str | None = None,
    payloads: list[bytes] | None = None,
    offset: int = 0,
) -> Encoded: ...
def reads_slots() -> bool: ...
