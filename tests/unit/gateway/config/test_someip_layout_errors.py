"""``edgebus check`` on SOME/IP layouts that name no type. A type name alone
(``layout: uint99``) was reported at ``layout.type``, a key the file does not have, and
a named layout's problem listed that layout itself among the types it could name."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

PRIMITIVES = "uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32, float64, bool"

CONFIG = """\
adapters:
  - type: someip
    name: s
    layouts:
      a: nosuchtype
      b: {type: struct, fields: [{name: x, type: uint99}]}
    consume:
      - service_id: 1
        instance_id: 1
        layout: uint99
"""


def test_an_unknown_type_name_is_reported_at_the_key_that_names_it(tmp_path: Path) -> None:
    code, lines = check(tmp_path, QUIET + CONFIG)
    assert (code, lines) == (
        2,
        [
            f"edgebus.yaml:7 adapters[0].layouts.a: unknown type 'nosuchtype'; known:"
            f" {PRIMITIVES}, string, array, struct, b",
            f"edgebus.yaml:8 adapters[0].layouts.b.fields[0].type: unknown type 'uint99';"
            f" known: {PRIMITIVES}, string, array, struct, a",
            f"edgebus.yaml:12 adapters[0].consume[0].layout: unknown type 'uint99'; known:"
            f" {PRIMITIVES}, string, array, struct, a, b",
        ],
    )
