"""``edgebus check`` reports a DDS type the dds adapter would refuse at start because
Cyclone's C core corrupts it (a union over a ``short`` discriminator with a negative case
label and a ``default`` case, ``idl_codegen.cyclone_limits``), as an error with the file,
line and YAML path of the mapping's ``type`` and the IDL file declaring the union. Before,
the check said OK and the adapter then backed off at run time. The same union over a
``long`` discriminator passes. The check parses the IDL only: it imports no cyclonedds.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import check_idl_lightly

UNIONS = """\
module u {
  union Short switch (short) { case -1: long long neg; case 7: unsigned short uu;
                               default: boolean flag; };
  union Long switch (long) { case -1: long long neg; case 7: unsigned short uu;
                             default: boolean flag; };
};
"""

TOPICS = """\
#include "unions.idl"
module u {
  struct S { long id; octet o; Short u; };
  struct L { long id; octet o; Long u; };
};
"""

WHY = (
    "has the negative case label -1 ('neg') on a short discriminator and a default case:"
    " Cyclone DDS reads such samples as the default case and corrupts them. Use a long"
    " discriminator, non-negative labels, or no default case"
)


def _check(tmp_path: Path, struct: str, union: str) -> tuple[int, str, list[str]]:
    """``edgebus check`` (with ``-X importtime``: the modules it imports go to stderr) on
    a dds adapter mapping ``struct`` from DDS and ``union`` to DDS; the exit status, the
    problem lines and the config's lines."""
    (tmp_path / "unions.idl").write_text(UNIONS, encoding="utf-8")
    topics = tmp_path / "topics.idl"
    topics.write_text(TOPICS, encoding="utf-8")
    text = f"""\
data_dir: {tmp_path / "data"}
listeners: [{{type: tcp, bind: "127.0.0.1:0"}}]
api: {{enabled: false}}
adapters:
  - type: dds
    name: d
    idl_files: [{topics}]
    dds_to_mqtt:
      - from_dds: t
        type: {struct}
        to_mqtt: a
    mqtt_to_dds:
      - from_mqtt: b
        to_dds: t2
        type: {union}
"""
    config = tmp_path / "edgebus.yaml"
    config.write_text(text, encoding="utf-8")
    status, output = check_idl_lightly(config)
    return status, output, text.splitlines()


def test_check_reports_a_union_cyclone_misreads_with_file_line_and_path(
        tmp_path: Path) -> None:
    status, output, lines = _check(tmp_path, "u::S", "u::Short")
    assert status == 2, output
    type_lines = [n for n, line in enumerate(lines, 1) if line.strip().startswith("type:")]
    assert len(type_lines) == 2
    unions = tmp_path / "unions.idl"
    assert (f"edgebus.yaml:{type_lines[0]} adapters[0].dds_to_mqtt[0].type: DDS type 'u::S'"
            f" is not supported: union 'u::Short' (used by 'u::S', declared in {unions}) {WHY}"
            ) in output, output
    assert (f"edgebus.yaml:{type_lines[1]} adapters[0].mqtt_to_dds[0].type: DDS type"
            f" 'u::Short' is not supported: union 'u::Short' (declared in {unions}) {WHY}"
            ) in output, output
    assert "OK" not in output


def test_check_passes_the_same_union_over_a_long_discriminator(tmp_path: Path) -> None:
    status, output, _ = _check(tmp_path, "u::L", "u::Long")
    assert status == 0, output
    assert output.strip().endswith("edgebus.yaml: OK"), output
