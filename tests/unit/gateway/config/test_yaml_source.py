"""YAML -> data with a line for every path, ``${ENV}`` interpolation, YAML pitfalls."""

from __future__ import annotations

import textwrap

import pytest

from broker_core.errors import ConfigError
from gateway.config.yaml_source import interpolate, read_yaml

ENV = {"USER_NAME": "ada", "EMPTY": "", "PORT": "1884"}


def read(text: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return read_yaml(textwrap.dedent(text), "edgebus.yaml", ENV if env is None else env)


def test_every_key_and_item_has_its_line() -> None:
    document = read(
        """\
        node_name: a
        listeners:
          - type: tcp
            bind: "127.0.0.1:1883"
          -
            type: ws
        mqtt:
          max_qos: 1
        """
    )
    assert document.data == {
        "node_name": "a",
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:1883"}, {"type": "ws"}],
        "mqtt": {"max_qos": 1},
    }
    assert document.lines == {
        (): 1,
        ("node_name",): 1,
        ("listeners",): 2,
        ("listeners", 0): 3,
        ("listeners", 0, "type"): 3,
        ("listeners", 0, "bind"): 4,
        ("listeners", 1): 6,
        ("listeners", 1, "type"): 6,
        ("mqtt",): 7,
        ("mqtt", "max_qos"): 8,
    }
    assert document.problems == []


def test_a_missing_path_takes_the_line_of_its_nearest_ancestor() -> None:
    document = read(
        """\
        # comment
        listeners:
          - type: tcp
        """
    )
    assert document.line_of(("listeners", 0, "bind")) == 3
    assert document.line_of(("mqtt", "max_qos")) == 2  # the root mapping's first line
    assert document.line_of(()) == 2


def test_empty_file_is_no_data() -> None:
    document = read("# nothing here\n")
    assert document.data is None
    assert document.line_of(("x",)) == 1


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("plain", "plain"),
        ("${USER_NAME}", "ada"),
        ("user-${USER_NAME}-x", "user-ada-x"),
        ("${UNSET:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${USER_NAME:-fallback}", "ada"),
        ("${EMPTY}", ""),
        ("${UNSET:-}", ""),
        ("${UNSET:-a b:c}", "a b:c"),
        ("$${USER_NAME}", "${USER_NAME}"),
        ("cost: $5", "cost: $5"),
        ("${PORT}${PORT}", "18841884"),
    ],
)
def test_interpolation(text: str, result: str) -> None:
    assert interpolate(text, ENV) == (result, [])


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (
            "${UNSET}",
            ["environment variable UNSET is not set (write ${UNSET:-default} to give a default)"],
        ),
        ("${}", ["malformed reference '${}'; expected ${NAME} or ${NAME:-default}"]),
        ("${1X}", ["malformed reference '${1X}'; expected ${NAME} or ${NAME:-default}"]),
        ("${A-b}", ["malformed reference '${A-b}'; expected ${NAME} or ${NAME:-default}"]),
        ("${OPEN", ["malformed reference '${OPEN'; expected ${NAME} or ${NAME:-default}"]),
    ],
)
def test_interpolation_problems(text: str, problems: list[str]) -> None:
    assert interpolate(text, ENV)[1] == problems


def test_interpolation_applies_to_values_not_keys_and_not_twice() -> None:
    document = read(
        """\
        ${USER_NAME}: "${USER_NAME}"
        quoted: '${PORT}'
        plain: ${PORT}
        nested: ${LOOP}
        """,
        env={"USER_NAME": "ada", "PORT": "1884", "LOOP": "${PORT}"},
    )
    assert document.data == {
        "${USER_NAME}": "ada",
        "quoted": "1884",
        "plain": "1884",
        "nested": "${PORT}",
    }


def test_unset_variables_are_problems_at_their_path_and_line() -> None:
    document = read(
        """\
        auth:
          http:
            url: ok
            headers:
              Authorization: "Bearer ${TOKEN}"
        node_name: ${A}-${B}
        """,
        env={},
    )
    assert [(p.path, p.line, p.message) for p in document.problems] == [
        (
            ("auth", "http", "headers", "Authorization"),
            5,
            "environment variable TOKEN is not set (write ${TOKEN:-default} to give a default)",
        ),
        (
            ("node_name",),
            6,
            "environment variable A is not set (write ${A:-default} to give a default)",
        ),
        (
            ("node_name",),
            6,
            "environment variable B is not set (write ${B:-default} to give a default)",
        ),
    ]


def test_scalars_keep_their_yaml_types() -> None:
    document = read(
        """\
        i: 3
        f: 1.5
        b: true
        n: null
        tilde: ~
        empty:
        s: "3"
        on: yes
        """
    )
    assert document.data == {
        "i": 3,
        "f": 1.5,
        "b": True,
        "n": None,
        "tilde": None,
        "empty": None,
        "s": "3",
        "on": True,  # keys are kept as written, values follow YAML 1.1
    }


def test_duplicate_keys_are_problems() -> None:
    document = read(
        """\
        mqtt:
          max_qos: 1
          max_inflight: 4
          max_qos: 2
        """
    )
    assert [(p.path, p.line, p.message) for p in document.problems] == [
        (("mqtt", "max_qos"), 4, "duplicate key (first given on line 2)")
    ]


def test_anchors_aliases_and_merge_keys() -> None:
    document = read(
        """\
        base: &base
          allow_anonymous: false
          max_connections: 10
        listeners:
          - <<: *base
            type: tcp
            max_connections: 20
          - *base
        """
    )
    assert document.data == {
        "base": {"allow_anonymous": False, "max_connections": 10},
        "listeners": [
            {"allow_anonymous": False, "max_connections": 20, "type": "tcp"},
            {"allow_anonymous": False, "max_connections": 10},
        ],
    }
    assert document.problems == []
    assert document.lines[("listeners", 0, "max_connections")] == 7
    assert document.lines[("listeners", 0, "allow_anonymous")] == 2  # where it is written
    assert document.lines[("listeners", 1, "max_connections")] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !secret x\n", "edgebus.yaml:1 a: unsupported YAML tag '!secret'"),
        ("a: &x [*x]\n", "edgebus.yaml:1 a[0]: recursive alias; an anchor cannot contain itself"),
        (
            "a: &x\n  b: 1\n  <<: *x\n",
            "edgebus.yaml:3 a: recursive alias; an anchor cannot contain itself",
        ),
        ("? [a, b]\n: 1\n", "edgebus.yaml:1: a key must be a plain string, not a collection"),
        (
            "a:\n  <<: 5\n",
            "edgebus.yaml:2 a: a '<<' merge key needs a mapping or a list of mappings",
        ),
    ],
)
def test_yaml_oddities_are_problems(text: str, message: str) -> None:
    document = read(text)
    assert [p.render("edgebus.yaml") for p in document.problems] == [message]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "mqtt:\n  max_qos: 1\n   max_inflight: 2\n",
            "edgebus.yaml:3:16: YAML syntax error: mapping values are not allowed here. Hint:"
            " line 3 is indented more than line 2, so YAML reads it as part of that line's"
            " value: indent the keys of one mapping alike",
        ),
        (
            "a: [1\n",
            "edgebus.yaml:2:1: YAML syntax error: expected ',' or ']', but got '<stream end>'"
            " (while parsing a flow sequence started on line 1). Hint: the '[' opened on line 1"
            " is not closed, or a ',' is missing between items",
        ),
        (
            "listeners:\n\t- type: tcp\n",
            "edgebus.yaml:2:1: YAML syntax error: found character '\\t' that cannot start any"
            " token (while scanning for the next token). Hint: YAML indents with spaces, never"
            " with tabs",
        ),
        (
            "a: 1\n---\nb: 2\n",
            "edgebus.yaml:2:1: YAML syntax error: expected a single document in the stream"
            " started on line 1, but found another document. Hint: a configuration file holds"
            " one YAML document: remove the '---' line",
        ),
        (
            'a: "unterminated\n',
            "edgebus.yaml:2:1: YAML syntax error: found unexpected end of stream"
            " (while scanning a quoted scalar started on line 1). Hint: the quote opened on"
            " line 1 is not closed",
        ),
        (
            "a: 1\nb: x\x00\n",
            "edgebus.yaml:2:5: YAML syntax error: character U+0000 is not allowed",
        ),
    ],
)
def test_syntax_errors_name_file_line_and_column(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read(text)
    assert caught.value.problems == [message]
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("listeners:\n  - type: tcp\n     bind: 1\n", "line 3 is indented more than line 2"),
        ("mqtt:\n  max_qos: 1\n bad: 2\n", "line 3 does not line up with the lines above it"),
        ("a: b: c\n", "a value that holds ': ' must be quoted"),
        ("mqtt:\n  max_qos 1\n  x: 2\n", "line 2 has no ':' after its key"),
        ("a: {x: 1\n", "the '{' opened on line 1 is not closed"),
    ],
)
def test_indentation_and_syntax_errors_carry_a_hint(text: str, hint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read(text)
    [message] = caught.value.problems
    assert message.startswith("edgebus.yaml:")
    assert f". Hint: {hint}" in message
