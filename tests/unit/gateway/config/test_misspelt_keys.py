"""``edgebus check`` on a misspelt key. The unknown-key line names the key meant
(``did you mean 'bind'?``); when that key is required, a second line said it was missing,
at the line of the mapping rather than of the misspelt key. Now the unknown-key line
stands alone."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

MISSPELT_REQUIRED = """\
api: {enabled: false}
listeners:
  - type: tcp
    bindx: "127.0.0.1:0"
adapters:
  - type: someip
    name: car
    consume:
      - service_id: 0x2000
        instance_id: 1
        events:
          - {idx: 1, to_mqtt: t}
"""


def test_a_misspelt_required_key_is_one_line_at_the_misspelt_key(tmp_path: Path) -> None:
    code, lines = check(tmp_path, MISSPELT_REQUIRED)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:4 listeners[0]: unknown key 'bindx'; did you mean 'bind'?",
            "edgebus.yaml:12 adapters[0].consume[0].events[0]: unknown key 'idx';"
            " did you mean 'id'?",
        ],
    )


def test_a_required_key_left_out_is_still_reported(tmp_path: Path) -> None:
    text = "api: {enabled: false}\nlisteners:\n  - type: tcp\n    port: 1883\n"
    code, lines = check(tmp_path, text)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:3 listeners[0]: missing required key 'bind'",
            "edgebus.yaml:4 listeners[0]: unknown key 'port'",
        ],
    )


MISSPELT_TYPE = """\
adapters:
  - name: lb
    typex: loopback
    mappings: [{source: a/b, target: c/d}]
  - name: lb2
    mappings: [{source: a/b, target: c/d}]
rules:
  - name: r
    sql: 'SELECT * FROM "a/#"'
    actions:
      - {tpye: log}
"""


def test_a_misspelt_type_of_a_tagged_item_names_the_misspelt_key(tmp_path: Path) -> None:
    """Adapters and rule actions are chosen by their ``type``: a misspelt ``type`` said
    only "missing required key 'type'", not which key was meant as one."""
    code, lines = check(tmp_path, QUIET + MISSPELT_TYPE)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:5 adapters[0]: unknown key 'typex'; did you mean 'type'?",
            "edgebus.yaml:7 adapters[1]: missing required key 'type'",
            "edgebus.yaml:13 rules[0].actions[0]: unknown key 'tpye'; did you mean 'type'?",
        ],
    )


BRIDGES = """\
bridges:
  - name: a
    forwards: [{local: "a/#"}]
  - name: b
    servr: "127.0.0.1:1883"
    forwards: [{local: "a/#"}]
"""


def test_a_bridge_without_a_server_is_named_like_any_missing_key(tmp_path: Path) -> None:
    """The bridge's check between keys said ``bridges[0].server: missing required key
    'server'`` (the key twice), and kept that line beside a misspelt ``server``'s."""
    code, lines = check(tmp_path, QUIET + BRIDGES)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:4 bridges[0]: missing required key 'server'",
            "edgebus.yaml:7 bridges[1]: unknown key 'servr'; did you mean 'server'?",
        ],
    )
