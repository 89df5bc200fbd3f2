"""The ``rules:`` section: statements checked by the rule engine's parser, and the
webhooks, bridges and stream log that actions name."""

from __future__ import annotations

import pytest

from broker_core.errors import ConfigError
from gateway.config import parse_config


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "edgebus.yaml")
    return caught.value.problems


def test_a_bad_statement_names_the_position() -> None:
    problems = _problems(
        """\
rules:
  - name: r
    sql: 'SELECT a FROM "t/#" WHERE a >'
    actions: [{type: log}]
"""
    )
    assert len(problems) == 1
    assert problems[0].startswith("edgebus.yaml:3 rules[0].sql: ")
    assert problems[0].endswith(
        "expected a value, a field or a function, got the end of the statement"
        " at position 29 (line 1, column 30)"
    )


def test_actions_name_what_exists() -> None:
    problems = _problems(
        """\
rules:
  - name: r
    sql: 'SELECT * FROM "t/#"'
    actions:
      - {type: webhook, webhook: nowhere}
      - {type: bridge, bridge: nobody, topic: x}
      - {type: stream, topic: y}
"""
    )
    assert problems == [
        "edgebus.yaml:5 rules[0].actions[0].webhook: no webhook named 'nowhere'",
        "edgebus.yaml:6 rules[0].actions[1].bridge: no bridge named 'nobody'",
        "edgebus.yaml:7 rules[0].actions[2].type: the stream log is not enabled (`stream`)",
    ]


def test_every_action_type_loads() -> None:
    config = parse_config(
        """\
bridges:
  - {name: cloud, server: "127.0.0.1:1883", forwards: [{local: "up/#"}]}
stream: {enabled: true}
webhooks:
  - {name: hook, url: "http://127.0.0.1:9/x"}
rules:
  - name: r
    sql: 'SELECT * FROM "t/#", "$events/client_connected"'
    actions:
      - {type: republish, topic: "out/{clientid}", payload: '{"a": {topic}}'}
      - {type: sqlite, table: rows}
      - {type: webhook, webhook: hook}
      - {type: bridge, bridge: cloud, topic: "up/{clientid}"}
      - {type: stream, topic: "derived/{clientid}"}
      - {type: log, level: debug}
"""
    )
    assert [a.type for a in config.rules[0].actions] == [
        "republish", "sqlite", "webhook", "bridge", "stream", "log"
    ]  # fmt: skip
    assert config.rules[0].sources() == ["t/#", "$events/client_connected"]


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (
            RecursionError("maximum recursion depth exceeded"),
            "the statement is too large to compile (RecursionError): write it as several"
            " rules, or with shorter expressions",
        ),
        (
            TypeError("a bug"),
            "the statement could not be compiled (TypeError: a bug)",
        ),
    ],
)
def test_a_statement_the_compiler_fails_on_is_a_problem_of_its_sql(
    monkeypatch: pytest.MonkeyPatch, raised: Exception, message: str
) -> None:
    """Whatever the compiler raises, the rule's ``sql`` is refused with its file and line
    (a 422 through the API), never a traceback: ``edgebus check``, a reload and ``POST
    /rules`` validate it this way."""
    import gateway.rules.compiler

    def fail(sql: str) -> None:
        raise raised

    monkeypatch.setattr(gateway.rules.compiler, "compile_statement", fail)
    problems = _problems(
        """\
rules:
  - name: r
    sql: 'SELECT * FROM "t/#" WHERE qos = 1'
    actions: [{type: log}]
"""
    )
    assert problems == [f"edgebus.yaml:3 rules[0].sql: {message}"]
