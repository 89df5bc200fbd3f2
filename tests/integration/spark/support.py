"""Shared by the Spark tests: one local Spark session per module, and Parquet as committed.

A session takes 7-20 s to start and ~400 MB: a module starts one (``spark_session``)
and its tests share it. ``committed_rows`` reads a Parquet sink the way Spark does,
through its ``_spark_metadata`` log, so files of a batch that never committed do not
count.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from spark_sink.job import prepare_environment

__all__ = ["committed_files", "committed_rows", "spark_session"]


def spark_session(master: str = "local[2]") -> Iterator[Any]:
    """A local session with the ``edgebus`` source registered (generator for a fixture)."""
    saved = {
        name: os.environ.get(name) for name in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYTHONPATH")
    }
    prepare_environment(master)
    from pyspark.sql import SparkSession

    from spark_sink.datasource import EdgebusDataSource

    spark = (
        SparkSession.builder.master(master)
        .appName("edgebus-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(EdgebusDataSource)
    try:
        yield spark
    finally:
        spark.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def committed_files(out: Path) -> list[Path]:
    """The data files Parquet's ``_spark_metadata`` log lists as committed."""
    files: dict[str, str] = {}
    for entry in sorted((out / "_spark_metadata").iterdir()):
        if entry.name.startswith("."):
            continue
        lines = entry.read_text().splitlines()
        assert lines[0] == "v1", entry
        for line in lines[1:]:
            item = json.loads(line)
            files[item["path"]] = item["action"]
    return [Path(path.removeprefix("file:")) for path, action in files.items() if action == "add"]


def committed_rows(out: Path) -> list[dict[str, Any]]:
    """Every committed row, with its partition columns (``date``, ``protocol``) from
    its directory names."""
    rows: list[dict[str, Any]] = []
    for path in committed_files(out):
        parts = dict(part.split("=", 1) for part in path.parent.relative_to(out).parts)
        for row in pq.read_table(path).to_pylist():
            rows.append({**row, **parts, "ts": _utc(row["ts"])})
    return rows


def _utc(ts: Any) -> datetime.datetime:
    """Parquet's timestamp (INT96 reads back naive, in UTC) as an aware datetime."""
    if hasattr(ts, "to_pydatetime"):
        ts = ts.to_pydatetime()
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=datetime.UTC)
