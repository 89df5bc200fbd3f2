"""The wheel carries everything ``edgebus run`` needs: built from a copy of the
checkout, installed into a fresh virtual environment (its dependencies from the package
index), started there on free loopback ports, it serves MQTT and the HTTP API with its
OpenAPI description. Building it prints no setuptools deprecation box."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, REPO_ROOT, EdgebusProcess, free_port

pytestmark = pytest.mark.slow

#: What the checkout holds that is not the package (and would make a copy slow).
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "edgebus-data",
    "tests",
    "bench",
    "_records.c",  # the compiled encoder's build outputs: the wheel builds its own
    "*.so",
)


def pip(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """This environment's pip (the package index and cache it is configured with)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=unit(600),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The wheel, the ``edgebus`` script of a fresh venv it is installed in, the build log."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(REPO_ROOT, source, ignore=NOT_SOURCE)
    built = pip("wheel", "-v", "--no-deps", "--no-cache-dir", "-w", str(root / "dist"), str(source),
                cwd=root)  # fmt: skip
    [wheel] = (root / "dist").glob("edgebus-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip("--python", str(venv / "bin" / "python"), "install", "-q", str(wheel), cwd=root)
    return wheel, venv / "bin" / "edgebus", built.stdout + built.stderr


def test_the_build_prints_no_deprecation_box(installed: tuple[Path, Path, str]) -> None:
    _, _, log = installed
    assert "Successfully built edgebus" in log or "Created wheel for edgebus" in log
    assert "Deprecat" not in log
    assert "*" * 40 not in log  # setuptools' warning boxes


def test_the_wheel_holds_the_packages_and_the_license(installed: tuple[Path, Path, str]) -> None:
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {
        "adapters",
        "bridge",
        "broker_core",
        "gateway",
        "idl_codegen",
        "spark_sink",
        "edgebus-0.1.0.dist-info",
    }
    assert "edgebus-0.1.0.dist-info/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read("edgebus-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()


def test_the_wheel_carries_the_compiled_encoder(
    installed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Built from the .pyx where there is a C compiler (``make test`` installs gcc); the
    installed package imports it."""
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the optional extension is not built")
    wheel, edgebus, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if n.startswith("spark_sink/_records.") and n.endswith(".so")]
    check = (
        "from spark_sink import records as r\nprint(r.encode_columns is r.compiled_encode_columns)"
    )
    done = subprocess.run(
        [str(edgebus.with_name("python")), "-c", check],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=unit(30), check=True,
    )  # fmt: skip
    assert done.stdout == "True\n"  # the venv's module, not the checkout's


def test_the_installed_edgebus_serves_mqtt_and_the_api(
    installed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    _, edgebus, _ = installed
    version = subprocess.run(
        [str(edgebus), "--version"], capture_output=True, text=True, timeout=unit(30), check=True
    )
    assert version.stdout == "edgebus 0.1.0\n"
    python = edgebus.with_name("python")
    where = subprocess.run(
        [str(python), "-c", "import gateway; print(gateway.__file__)"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=unit(30),
        check=True,
    )
    assert where.stdout.startswith(str(python.parents[1]))  # the wheel's, not the checkout's
    api_port = free_port()
    extra = f"api:\n  bind: {LOOPBACK}:{api_port}\n"
    with EdgebusProcess(tmp_path, extra, command=[str(edgebus)]) as process:
        subscriber = RawClient(LOOPBACK, process.port)
        subscriber.do_connect("wheel-sub")
        subscriber.subscribe("wheel/#", 1)
        publisher = RawClient(LOOPBACK, process.port)
        publisher.do_connect("wheel-pub")
        publisher.send(mb.gen_publish("wheel/t", b"from the wheel", qos=0))
        message = subscriber.recv_packet(unit(5))
        assert (message.topic, message.payload) == ("wheel/t", b"from the wheel")
        key = (tmp_path / "edgebus-data" / "api-key").read_text().strip()
        request = urllib.request.Request(
            f"http://{LOOPBACK}:{api_port}/api/v1/openapi.json",
            headers={"Authorization": f"Bearer {key}"},
        )
        with urllib.request.urlopen(request, timeout=unit(10)) as reply:
            description = json.loads(reply.read())
        assert "/api/v1/clients" in description["paths"]
        subscriber.close()
        publisher.close()
