"""``adapters[]`` entries are validated by the model their ``type`` names in the component
registry, looked up when the file is loaded: a type registered later (a test's, an
embedder's) is validated, reported and documented like the built-in ones."""

from __future__ import annotations

import pytest

from broker_core.errors import ConfigError
from gateway.config import parse_config
from gateway.config.docgen import render_reference
from tests.helpers.components import FlakyConfig, registered  # noqa: F401

BOTH = """\
adapters:
  - type: loopback
    name: echo
    mappings: [{source: a/b, target: c/d}]
  - type: test-flaky
    name: flaky
    fail_starts: 0
"""


@pytest.mark.usefixtures("registered")
def test_each_entry_gets_the_model_of_its_type() -> None:
    config = parse_config(BOTH)
    assert [type(entry).__name__ for entry in config.adapters] == [
        "LoopbackAdapterConfig",
        "FlakyConfig",
    ]
    assert isinstance(config.adapters[1], FlakyConfig)
    assert config.adapters[1].fail_starts == 0


@pytest.mark.usefixtures("registered")
def test_errors_name_file_line_and_path_of_the_registered_model() -> None:
    text = BOTH.replace("fail_starts: 0", "fail_start: 0") + "  - {type: test-flaki, name: x}\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(text, "edgebus.yaml")
    assert raised.value.problems[0] == (
        "edgebus.yaml:7 adapters[1]: unknown key 'fail_start'; did you mean 'fail_starts'?"
    )
    assert raised.value.problems[1].startswith("edgebus.yaml:8 adapters[2].type: expected one of")
    assert "test-flaky" in raised.value.problems[1]
    assert raised.value.problems[1].endswith("got 'test-flaki'")


def test_an_unregistered_type_is_an_error_and_the_reference_omits_it() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(BOTH, "edgebus.yaml")
    # the choices are the registered types (loopback and whatever else is registered)
    problem = next(p for p in raised.value.problems if p.startswith("edgebus.yaml:5 "))
    assert problem.startswith("edgebus.yaml:5 adapters[1].type: expected one of loopback")
    assert problem.endswith("got 'test-flaky'")
    assert "test-flaky" not in render_reference()


@pytest.mark.usefixtures("registered")
def test_the_reference_documents_registered_types() -> None:
    reference = render_reference()
    assert "`type: test-flaky`" in reference
    assert "`adapters[].fail_starts`" in reference
