"""Whatever the file holds, the loader returns a config or raises ConfigError whose
every line names the file and a line number; it never crashes."""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import ConfigError, GatewayConfig, parse_config
from gateway.config.docgen import render_reference

# Keys the schema knows, so that generated documents reach deep into it.
KEYS = sorted(
    set(re.findall(r"\| `(?:[a-z_\[\]]+\.)*([a-z_]+)` \|", render_reference()))
    | set(GatewayConfig.model_fields)
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "tcp",
            "tls",
            "ws",
            "wss",
            "127.0.0.1:1883",
            "[::1]:0",
            "10s",
            "1MB",
            "#",
            "a/+/b",
            "${UNSET}",
            "${X:-1}",
            "allow",
            "deny",
            "/mqtt",
            "1.2",
            "https://a.example",
            "",
        ]
    ),
    st.text(max_size=8),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=6))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=6)
    ),
    max_leaves=30,
)
LINE = re.compile(r"^edgebus\.yaml:\d+(:\d+)?[ :]")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(keys, documents, max_size=8))
def test_any_document_loads_or_explains_itself(data: dict[str, object]) -> None:
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        parse_config(text, "edgebus.yaml", env={"X": "2"})
    except ConfigError as exc:
        assert exc.problems
        for line in exc.problems:
            assert LINE.match(line) is not None, line


YAML_CHARACTERS = "ab1:-[]{}#&*!|>'\"\n\t ,?%@`$\x00\x07\ufeff"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=YAML_CHARACTERS, max_size=40))
def test_any_text_loads_or_explains_itself(text: str) -> None:
    try:
        parse_config(text, "edgebus.yaml", env={})
    except ConfigError as exc:
        assert exc.problems
        for line in exc.problems:
            assert LINE.match(line) is not None, line
