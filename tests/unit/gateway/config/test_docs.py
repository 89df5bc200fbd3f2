"""docs/configuration.md is generated from the schema; examples/edgebus.yaml loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from pydantic import BaseModel

from gateway.config import GatewayConfig, dump_config, load_config, parse_config
from gateway.config.docgen import main, render_reference
from gateway.config.introspect import field_annotation, model_at, strip_annotated

ROOT = Path(__file__).resolve().parents[4]
REFERENCE = ROOT / "docs" / "configuration.md"
EXAMPLE = ROOT / "examples" / "edgebus.yaml"


def _key_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        paths.append(path)
        annotation = field_annotation(field)
        child = model_at(annotation)
        if child is None:
            bare, _ = strip_annotated(annotation)
            args = getattr(bare, "__args__", ())
            child = model_at(args[0]) if args else None
            path += "[]" if child is not None else ""
        if child is not None:
            paths.extend(_key_paths(child, path))
    return paths


def test_the_committed_reference_is_the_generated_one() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render_reference(), (
        "docs/configuration.md is stale: python -m gateway.config.docgen > docs/configuration.md"
    )


def test_the_reference_has_a_row_for_every_key() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    paths = _key_paths(GatewayConfig)
    assert "listeners[].tls.keyfile_password" in paths
    for path in paths:
        assert f"| `{path}` |" in text, path


def test_docgen_command(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gateway.config.docgen"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == render_reference()
    stale = tmp_path / "configuration.md"
    stale.write_text("old\n", encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    stale.write_text(render_reference(), encoding="utf-8")
    assert main(["--check", str(stale)]) == 0


def test_the_example_loads_and_uses_every_section() -> None:
    config = load_config(EXAMPLE, env={})
    written = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert set(written) == set(GatewayConfig.model_fields)
    assert {listener.type for listener in config.listeners} == {"tcp", "tls", "ws"}
    assert config.auth.http is not None
    assert config.acl.rules
    assert parse_config(dump_config(config), "dump.yaml", env={}) == config


def test_the_example_takes_secrets_from_the_environment() -> None:
    env = {"EDGEBUS_TLS_KEY_PASSWORD": "pw", "EDGEBUS_AUTH_TOKEN": "tok", "HOSTNAME": "gw1"}
    config = load_config(EXAMPLE, env=env)
    tls = config.listeners[1].tls
    assert tls is not None
    assert tls.keyfile_password is not None
    assert tls.keyfile_password.get_secret_value() == "pw"
    assert config.auth.http is not None
    assert config.auth.http.headers["Authorization"] == "Bearer tok"
    assert config.node_name == "edgebus@gw1"
