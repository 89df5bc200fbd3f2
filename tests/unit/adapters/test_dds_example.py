"""examples/vehicle-dds-to-cloud.yaml loads, and its mappings fit its IDL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import idl_codegen
from adapters.dds.adapter import DdsAdapter
from adapters.dds.codec import TypeRegistry
from adapters.ros2.adapter import Ros2Adapter
from broker_core.context import Origin
from gateway.config import load_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "vehicle-dds-to-cloud.yaml"


def test_the_example_loads_and_its_routes_fit_the_idl(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the example's paths are relative to the repository
    config = load_config(EXAMPLE)
    assert [a.type for a in config.adapters] == ["dds", "ros2"]
    assert [b.name for b in config.bridges] == ["cloud"]
    dds, ros2 = config.adapters
    types = TypeRegistry(idl_codegen.load(list(dds.idl_files)).types)
    outs, ins = DdsAdapter(dds).plans(types, Origin("dds", "vehicle"))
    for plan in outs:
        if plan.type_name != "auto":
            route = plan.route(plan.topic, types.support(plan.type_name))  # checks templates
            assert route.support.fast is not None  # @final types: the direct path
    assert [plan.type_name for plan in ins] == ["vehicle::Command"]
    types = Ros2Adapter(ros2)._load(tmp_path)
    for plan in Ros2Adapter(ros2).plans(types, Origin("ros2", "robot"))[0]:
        plan.route(plan.topic, types.support(plan.type_name))
    assert os.path.isfile(ROOT / "docs" / "adapters" / "dds.md")
