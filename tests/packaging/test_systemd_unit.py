"""examples/edgebus.service: the unit the README documents starts ``edgebus run`` with
the configuration it names, reloads with SIGHUP, and does not restart on a
configuration error (exit status 2); systemd itself accepts it."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import REPO_ROOT

UNIT = REPO_ROOT / "examples" / "edgebus.service"
INSTALLED = "/opt/edgebus/bin/edgebus"


def service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser["Service"]


def test_the_unit_runs_edgebus_as_the_readme_says() -> None:
    section = service()
    assert section["ExecStart"] == f"{INSTALLED} run -c /etc/edgebus/edgebus.yaml"
    assert section["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert section["RestartPreventExitStatus"] == "2"  # `edgebus run`'s configuration error
    assert section["StateDirectory"] == "edgebus"
    assert "examples/edgebus.service" in (REPO_ROOT / "README.md").read_text()


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    edgebus = Path(sys.executable).with_name("edgebus")
    copy = tmp_path / "edgebus.service"
    copy.write_text(UNIT.read_text().replace(INSTALLED, str(edgebus)))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        capture_output=True,
        text=True,
        timeout=unit(30),
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
