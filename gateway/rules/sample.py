"""Trying a statement on a sample message, without any action (``POST /rules/test``).

``sample_row`` builds the row of a sample (a message, or a broker event);
``test_statement`` runs a statement's FROM, WHERE and SELECT on it as the engine would
(``RuleEngine.test``).
"""

from __future__ import annotations

import json
from typing import Any

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from broker_core.mqtt.topics import filter_matches
from gateway.rules.fields import EventRow, MessageRow, Row

__all__ = ["sample_row", "test_statement"]


def sample_row(sample: dict[str, Any], node: str = "edgebus") -> Row:
    """The row of a sample for ``test``: a broker event when ``event`` names one other
    than ``message.publish`` (its columns as given), else a message built from
    ``topic``, ``payload`` (text, or any JSON value), ``qos``, ``retain``, ``clientid``,
    ``username``, ``peername``, ``user_properties``."""
    event = sample.get("event", "message.publish")
    if event != "message.publish":
        columns = dict(sample)
        payload = columns.get("payload")
        if payload is not None and not isinstance(payload, str):
            columns["payload"] = json.dumps(payload)
        return EventRow(columns)
    payload = sample.get("payload", "")
    data = payload if isinstance(payload, str) else json.dumps(payload)
    user = tuple((str(k), str(v)) for k, v in (sample.get("user_properties") or {}).items())
    context = Context(
        str(sample.get("topic", "")),
        data.encode(),
        int(sample.get("qos", 0)),
        bool(sample.get("retain", False)),
        properties=Properties(user_properties=user) if user else Properties(),
        origin=Origin(
            str(sample.get("origin", "mqtt")),
            str(sample.get("clientid", "")),
            sample.get("peername"),
            sample.get("username"),
        ),
    )
    return MessageRow(context, node)


def test_statement(sql: str, sample: dict[str, Any], node: str) -> dict[str, Any]:
    """Runs ``sql`` on ``sample`` (see ``sample_row``) without any action:
    ``{"matched": bool, "output": dict | None}``. Raises ``RuleSyntaxError``; an
    evaluation error is returned as ``error``."""
    from gateway.rules.compiler import compile_statement

    statement = compile_statement(sql)
    row = sample_row(sample, node)
    event = sample.get("event", "message.publish")
    if event == "message.publish":
        topic = str(sample.get("topic", ""))
        if not any(filter_matches(f, topic) for f in statement.topics):
            return {"matched": False, "output": None, "reason": "FROM does not match"}
    elif not any(
        "$events/" + event.replace(".", "_") == s for s in statement.statement.sources
    ):
        return {"matched": False, "output": None, "reason": "FROM does not match"}
    try:
        if isinstance(row, MessageRow):  # as the taps run it
            out = statement.message.run(row.context, row)
        else:
            out = statement.select(row) if statement.matches(row) else None
        if out is None:
            return {"matched": False, "output": None, "reason": "WHERE is not true"}
        return {"matched": True, "output": out}
    except Exception as exc:
        return {"matched": False, "output": None, "error": str(exc)}
