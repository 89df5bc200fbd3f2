"""The schema of the ``edgebus`` Spark source: one row per record of the stream log.

``offset`` is the record's place in the log (global, gap-free, kept across restarts);
``id`` the gateway's message id (unique within one run of the gateway); ``ts`` when the
gateway received it; ``protocol`` and ``source`` its origin (``mqtt`` and the client id,
``loopback`` and the adapter's name, ...); ``payload_json`` the payload as text when it is
a JSON document; ``properties`` its MQTT 5 properties; ``meta`` the protocol metadata.

No import of pyspark here: the DDL string is what ``DataSource.schema()`` returns.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "SPARK_SCHEMA"]

COLUMNS = (
    ("offset", "BIGINT"),
    ("id", "BIGINT"),
    ("ts", "TIMESTAMP"),
    ("protocol", "STRING"),
    ("source", "STRING"),
    ("topic", "STRING"),
    ("qos", "INT"),
    ("retain", "BOOLEAN"),
    ("content_type", "STRING"),
    ("payload", "BINARY"),
    ("payload_json", "STRING"),
    ("properties", "MAP<STRING, STRING>"),
    ("meta", "MAP<STRING, STRING>"),
)

SPARK_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
