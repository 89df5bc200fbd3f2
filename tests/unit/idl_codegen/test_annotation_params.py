"""Constants in ``@default(K)`` (and ``@id``, ``@value``), through the ``edgebus
idl-codegen`` command and ``idl_codegen.load``: names are looked up from the global
scope as Cyclone's ``idlc`` does, ``@default`` sets primitive and string members only,
and an accepted default is the generated dataclass default, the JSON codec's value for a
missing member (``strict=False``), the JSON Schema's ``default`` and what the CDR
transcoder reads from a default sample. The cases are in ``annotation_params``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import idl_codegen
from broker_core.errors import IdlError
from idl_codegen.cdr_json import transcoder_for
from tests.helpers.timeouts import unit
from tests.unit.idl_codegen.annotation_params import ANNOTATION_CASES, AnnotationCase

EDGEBUS = str(Path(sys.executable).with_name("edgebus"))
ACCEPTED = [case for case in ANNOTATION_CASES if case.error is None]
REFUSED = [case for case in ANNOTATION_CASES if case.error is not None]


def _type_name(case: AnnotationCase) -> str:
    return "M::S" if "module M" in case.idl else "S"


def _codegen(tmp_path: Path, case: AnnotationCase) -> subprocess.CompletedProcess[str]:
    (tmp_path / "t.idl").write_text(case.idl + "\n", encoding="utf-8")
    return subprocess.run([EDGEBUS, "idl-codegen", "t.idl", "-o", "out", "-q"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=unit(60), check=False)


@pytest.mark.parametrize("case", REFUSED, ids=[case.name for case in REFUSED])
def test_the_command_refuses_with_file_line_and_column(tmp_path: Path,
                                                       case: AnnotationCase) -> None:
    done = _codegen(tmp_path, case)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == case.error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", REFUSED, ids=[case.name for case in REFUSED])
def test_the_loader_refuses_with_file_line_and_column(tmp_path: Path,
                                                      case: AnnotationCase) -> None:
    (tmp_path / "t.idl").write_text(case.idl + "\n", encoding="utf-8")
    with pytest.raises(IdlError) as caught:
        idl_codegen.load(tmp_path / "t.idl")
    assert case.error is not None
    first = str(caught.value).splitlines()[0]
    assert first == case.error.replace("t.idl", str(tmp_path / "t.idl"), 1)
    line, column = (int(part) for part in case.error.split(":")[1:3])
    assert (caught.value.line, caught.value.column) == (line, column)


@pytest.mark.parametrize("case", ACCEPTED, ids=[case.name for case in ACCEPTED])
def test_the_command_generates_the_defaults(tmp_path: Path, case: AnnotationCase) -> None:
    done = _codegen(tmp_path, case)
    assert (done.returncode, done.stderr) == (0, "")
    module, _, name = _type_name(case).rpartition("::")
    code = (f"import json\nfrom {module or 'idl_global'} import {name}\n"
            f"print(json.dumps({{k: getattr({name}(), k) for k in {sorted(case.defaults)!r}}}))")
    imported = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "out",
                              capture_output=True, text=True, timeout=unit(60), check=False)
    assert imported.stderr == ""
    assert json.loads(imported.stdout) == case.defaults
    schema_file = tmp_path / "out" / "json-schema" / f"{_type_name(case).replace('::', '.')}" \
                                                     ".schema.json"
    document = json.loads(schema_file.read_text(encoding="utf-8"))
    properties = document["$defs"][_type_name(case)]["properties"]
    assert {member: properties[member]["default"] for member in case.defaults} == case.defaults


@pytest.mark.parametrize("case", ACCEPTED, ids=[case.name for case in ACCEPTED])
def test_the_loader_and_json_take_the_defaults(tmp_path: Path, case: AnnotationCase) -> None:
    (tmp_path / "t.idl").write_text(case.idl + "\n", encoding="utf-8")
    schema = idl_codegen.load(tmp_path / "t.idl")
    name = _type_name(case)
    sample: Any = schema[name]()
    assert {member: getattr(sample, member) for member in case.defaults} == case.defaults
    codec = schema.codec(name)
    filled = codec.to_json(codec.from_json({}, strict=False))
    assert {member: filled[member] for member in case.defaults} == case.defaults
    transcoder = transcoder_for(schema.description, name)
    assert transcoder is not None
    read = transcoder.to_json(sample.serialize())
    assert json.loads(read) == codec.to_json(sample)
