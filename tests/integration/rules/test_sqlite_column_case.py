"""The sqlite action matches a table's columns as SQLite does, without regard to the case
of ASCII letters: a field ``V`` goes into an existing column ``v`` (a table created when
unquoted names were lower-cased, or by another rule), and table ``T`` is table ``t``.
Before, the action added a column ``V``, which SQLite refused ('duplicate column name:
V'), and every row failed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import wait_until
from tests.integration.rules.support import gateway_with_clients

CONFIG = """
rules:
  - name: lower
    sql: SELECT payload.v AS v, payload.n AS n FROM "low/#"
    actions: [{type: sqlite, table: t}]
  - name: upper
    sql: SELECT payload.v AS `V`, payload.n AS `N`, payload.w AS `W` FROM "up/#"
    actions: [{type: sqlite, table: T}]
  - name: old
    sql: SELECT payload.deviceId AS `deviceId` FROM "old/#"
    actions: [{type: sqlite, table: readings}]
"""


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


def _counts(gw: RunningGateway) -> dict[str, tuple[int, int]]:
    def read() -> dict[str, tuple[int, int]]:
        return {
            status["name"]: (status["actions"][0]["succeeded"], status["actions"][0]["failed"])
            for status in gw.gateway.rules.statuses()
        }

    return gw.call(read)


def test_fields_go_into_columns_differing_only_by_case(tmp_path: Path) -> None:
    database = tmp_path / "data" / "rules.db"
    database.parent.mkdir(parents=True)
    with sqlite3.connect(database) as db:  # a table of before: lower-cased names
        db.execute("CREATE TABLE readings (_rowid INTEGER PRIMARY KEY, _at INTEGER, deviceid)")
    with gateway_with_clients(tmp_path, CONFIG) as (gw, clients):
        device = clients.connect(4, "dev")
        device.publish("low/a", json.dumps({"v": 1, "n": "a"}), qos=1)
        wait_until(lambda: _counts(gw)["lower"] == (1, 0), what="the first row written")
        device.publish("up/a", json.dumps({"v": 2, "n": "b", "w": 9}), qos=1)
        device.publish("old/a", json.dumps({"deviceId": "d-1"}), qos=1)
        wait_until(
            lambda: _counts(gw)["upper"] != (0, 0) and _counts(gw)["old"] != (0, 0),
            what="the rows of upper and old counted",
        )
        assert _counts(gw) == {"lower": (1, 0), "upper": (1, 0), "old": (1, 0)}
    assert _rows(database, "SELECT v, n, W FROM t ORDER BY _rowid") == [
        (1, "a", None),
        (2, "b", 9),
    ]
    assert [row[1] for row in _rows(database, "PRAGMA table_info(t)")] == [
        "_rowid", "_at", "v", "n", "W",
    ]  # fmt: skip
    assert _rows(database, "SELECT deviceid FROM readings") == [("d-1",)]
