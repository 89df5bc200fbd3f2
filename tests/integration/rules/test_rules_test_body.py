"""``POST /api/v1/rules/test`` refuses unknown fields, as every request body does: a typo
(``sampel``, ``paylod``) would otherwise test the default sample and answer 200."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import Http

SQL = 'SELECT payload.t * 2 AS double FROM "s/#" WHERE payload.t > 1'


@pytest.fixture
def http(tmp_path: Path) -> Iterator[Http]:
    with running_gateway(tmp_path, API_CONFIG) as gw:
        yield http_of(gw)


def test_a_sample_runs(http: Http) -> None:
    reply = http.post(
        "/api/v1/rules/test",
        {"sql": SQL, "sample": {"topic": "s/1", "payload": {"t": 4}, "origin": "zmq"}},
    )
    assert (reply.status, reply.json()) == (
        200,
        {"matched": True, "output": {"double": 8}, "reason": None, "error": None},
    )


def test_an_unknown_field_of_the_body_is_refused(http: Http) -> None:
    reply = http.post("/api/v1/rules/test", {"sql": SQL, "sampel": {"topic": "s/1"}})
    assert reply.status == 422, reply.text
    [problem] = reply.json()["detail"]
    assert (problem["type"], problem["loc"]) == ("extra_forbidden", ["body", "sampel"])


def test_an_unknown_field_of_a_message_sample_is_refused(http: Http) -> None:
    reply = http.post(
        "/api/v1/rules/test", {"sql": SQL, "sample": {"topic": "s/1", "paylod": {"t": 4}}}
    )
    assert reply.status == 422, reply.text
    [problem] = reply.json()["detail"]
    assert (problem["type"], problem["loc"]) == ("extra_forbidden", ["body", "sample"])
    assert problem["msg"].startswith("unknown field(s) of a message sample: paylod (a message")


def test_an_event_sample_takes_its_columns(http: Http) -> None:
    sql = 'SELECT clientid, reason FROM "$events/client_disconnected"'
    sample = {"event": "client.disconnected", "clientid": "c1", "reason": "kicked"}
    reply = http.post("/api/v1/rules/test", {"sql": sql, "sample": sample})
    assert reply.status == 200, reply.text
    assert reply.json()["output"] == {"clientid": "c1", "reason": "kicked"}


def test_a_binary_value_is_shown_as_base64_text_as_actions_write_it(http: Http) -> None:
    """Before, a result holding bytes answered 500 (PydanticSerializationError: invalid
    utf-8); the actions write bytes as base64 text, and so does /rules/test."""
    sql = "SELECT base64_decode('//79') AS a, 1e308 * 10 AS big, payload FROM \"#\""
    reply = http.post("/api/v1/rules/test", {"sql": sql, "sample": {"topic": "s/1"}})
    assert reply.status == 200, reply.text
    output = reply.json()["output"]
    assert (output["a"], output["big"]) == ("//79", None)
