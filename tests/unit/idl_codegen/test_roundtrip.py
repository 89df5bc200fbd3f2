"""Random samples of every corpus type survive JSON and CDR round trips unchanged."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import idl_codegen
from idl_codegen.loader import LoadedSchema
from tests.unit.idl_codegen.corpus import CASES
from tests.unit.idl_codegen.strategies import samples

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@cache
def loaded(case: str) -> LoadedSchema:
    files, include_dirs = CASES[case]
    return idl_codegen.load(files, include_dirs=include_dirs)


TYPES = [(case, name) for case in sorted(CASES)
         for name in sorted(loaded(case).types)
         if not hasattr(loaded(case).types[name], "__members__")]  # structs and unions


@pytest.mark.parametrize(("case", "name"), TYPES)
@SETTINGS
@given(data=st.data())
def test_json_round_trip(case: str, name: str, data: st.DataObject) -> None:
    cls = loaded(case).types[name]
    codec = loaded(case).codec(name)
    sample = data.draw(samples(cls))
    assert codec.from_json(codec.to_json(sample)) == sample
    assert codec.loads(codec.dumps(sample)) == sample


@pytest.mark.parametrize(("case", "name"), TYPES)
@SETTINGS
@given(data=st.data())
def test_cdr_round_trip(case: str, name: str, data: st.DataObject) -> None:
    cls: Any = loaded(case).types[name]
    codec = loaded(case).codec(name)
    sample = data.draw(samples(cls))
    for version_2 in (False, True):
        decoded = cls.deserialize(sample.serialize(use_version_2=version_2))
        assert decoded == sample
        assert codec.to_json(decoded) == codec.to_json(sample)


@pytest.mark.parametrize(("case", "name"), TYPES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_json_output_matches_json_schema(case: str, name: str, data: st.DataObject) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    codec = loaded(case).codec(name)
    sample = data.draw(samples(loaded(case).types[name]))
    validator = validator_for(case, name, jsonschema)
    assert list(validator.iter_errors(codec.to_json(sample))) == []


@cache
def _validators() -> dict[tuple[str, str], Any]:
    return {}


def validator_for(case: str, name: str, jsonschema: Any) -> Any:
    cached = _validators()
    if (case, name) not in cached:
        cached[case, name] = jsonschema.Draft202012Validator(loaded(case).json_schema(name))
    return cached[case, name]
