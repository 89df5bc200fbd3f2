"""Users migrating from mosquitto keep their password file: one written by Debian's
``mosquitto_passwd`` (``$7$`` PBKDF2-SHA512 and ``$6$`` salted SHA-512) logs
mosquitto_pub and paho in, and ``edgebus passwd`` adds users to it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli import main
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.security.support import paho_login
from tests.interop.mosquitto.tools import LOOPBACK, MosquittoSub, mosquitto_pub, run_args

pytestmark = pytest.mark.interop


def mosquitto_passwd(*args: str) -> None:
    subprocess.run(["mosquitto_passwd", *args], check=True, timeout=unit(10))


@pytest.fixture
def passwd(tmp_path: Path) -> Path:
    if shutil.which("mosquitto_passwd") is None:
        pytest.skip("mosquitto_passwd is not installed (apt-get install mosquitto)")
    path = tmp_path / "passwd"
    mosquitto_passwd("-c", "-b", str(path), "alice", "wonderland")  # $7$, mosquitto 2.x
    mosquitto_passwd("-H", "sha512", "-b", str(path), "carol", "hunter2")  # $6$, mosquitto 1.x
    return path


@pytest.fixture
def gw(tmp_path: Path, passwd: Path) -> Iterator[RunningGateway]:
    config = (
        "listeners:\n  - {type: tcp, bind: '127.0.0.1:0', allow_anonymous: false}\n"
        f"auth:\n  password_file: '{passwd}'\napi:\n  enabled: false\n"
    )
    with running_gateway(tmp_path / "gw", config) as gateway:
        yield gateway


def test_mosquitto_clients_log_in_with_a_mosquitto_password_file(
    gw: RunningGateway, passwd: Path
) -> None:
    assert [line.split("$")[1] for line in passwd.read_text().splitlines()] == ["7", "6"]
    port = gw.port
    with MosquittoSub(
        LOOPBACK, port, *run_args("mqttv311", 1), "-u", "alice", "-P", "wonderland",
        "-t", "m/#", "-C", "2", client_id="alice-sub",
    ) as sub:  # fmt: skip
        sub.wait_subscribed()
        mosquitto_pub(LOOPBACK, port, "-u", "carol", "-P", "hunter2", "-t", "m/1", "-m", "six")
        mosquitto_pub(LOOPBACK, port, "-V", "mqttv5", "-u", "alice", "-P", "wonderland",
                      "-t", "m/2", "-m", "seven")  # fmt: skip
        assert [(m.topic, m.payload) for m in sub.expect_messages(2)] == [
            ("m/1", "six"),
            ("m/2", "seven"),
        ]
    with pytest.raises(AssertionError, match="exited with"):
        mosquitto_pub(LOOPBACK, port, "-u", "alice", "-P", "hunter2", "-t", "m/3", "-m", "no")


@pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])
def test_paho_logs_in_and_a_wrong_password_is_refused(gw: RunningGateway, proto: int) -> None:
    with paho_login(gw, proto, f"ok{proto}", "carol", "hunter2") as client:
        assert client.connect().reason_code == 0
    with paho_login(gw, proto, f"bad{proto}", "alice", "wonderlan") as client:
        assert client.connect(expect_success=False).reason_code in (4, 0x86)  # bad password


def test_edgebus_passwd_adds_a_user_and_keeps_the_mosquitto_ones(passwd: Path) -> None:
    before = passwd.read_text().splitlines()
    with pytest.raises(SystemExit) as done:
        main(["passwd", "-b", "-I", "4096", str(passwd), "dave", "s3cret"], standalone_mode=True)
    assert done.value.code == 0
    after = passwd.read_text().splitlines()
    assert after[:2] == before
    assert after[2].startswith("dave:$pbkdf2-sha256$4096$")
    mosquitto_passwd("-b", str(passwd), "erin", "x")  # mosquitto reads ours back, too
    assert [line.split(":")[0] for line in passwd.read_text().splitlines()] == [
        "alice", "carol", "dave", "erin",
    ]  # fmt: skip
