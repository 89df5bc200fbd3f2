"""``edgebus passwd``: create, add, change, delete users; then log in with the file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from broker_core.passwords import read_password_file, verify_password
from gateway.cli import main
from tests.helpers.timeouts import unit
from tests.integration.security.support import connect_raw, paho_login, security_gateway

FAST = ["-I", "4096"]


def passwd(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["passwd", *args], input=input)
    return result.exit_code, result.output


def test_round_trip_then_login(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", *FAST, str(path), "alice", "wonderland") == (0, "")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    code, output = passwd(*FAST, str(path), "bob", input="builder\nbuilder\n")
    assert code == 0
    assert "Password" in output
    code, output = passwd("-b", *FAST, str(path), "carol", "c4rol")
    assert code == 0
    users = read_password_file(path)
    assert sorted(users) == ["alice", "bob", "carol"]
    assert verify_password(b"builder", users["bob"]) is True
    assert users["alice"].iterations == 4096

    # change alice's password, delete carol
    assert passwd("-b", *FAST, str(path), "alice", "looking-glass") == (0, "")
    assert passwd("-D", str(path), "carol") == (0, "")
    users = read_password_file(path)
    assert sorted(users) == ["alice", "bob"]
    assert verify_password(b"wonderland", users["alice"]) is False
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    config = {
        "listeners": [
            {"type": "tcp", "name": "closed", "bind": "127.0.0.1:0", "allow_anonymous": False}
        ],
        "auth": {"password_file": str(path)},
    }
    with security_gateway(tmp_path, config) as gw:
        for proto in (4, 5):
            with paho_login(gw, proto, f"alice{proto}", "alice", "looking-glass") as client:
                assert client.connect().reason_code == 0
        client_v5, _ = connect_raw(
            gw, 5, "a", username="alice", password="wonderland", expect_code=0x86
        )
        client_v5.close()
        client_v4, _ = connect_raw(gw, 4, "c", username="carol", password="c4rol", expect_code=4)
        client_v4.close()
        # the running gateway follows changes of the file
        assert passwd("-b", *FAST, str(path), "carol", "back") == (0, "")
        client_v4, _ = connect_raw(gw, 4, "c", username="carol", password="back")
        client_v4.disconnect()


def test_prompt_asks_again_when_the_passwords_differ(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    code, output = passwd("-c", *FAST, str(path), "alice", input="one\ntwo\nthree\nthree\n")
    assert code == 0
    assert "do not match" in output
    assert verify_password(b"three", read_password_file(path)["alice"]) is True


def test_create_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    passwd("-c", "-b", *FAST, str(path), "alice", "a")
    passwd("-c", "-b", *FAST, str(path), "bob", "b")
    assert sorted(read_password_file(path)) == ["bob"]


def test_errors(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    code, output = passwd("-b", str(path), "alice", "a")
    assert (code, "does not exist" in output) == (1, True)
    passwd("-c", "-b", *FAST, str(path), "alice", "a")
    code, output = passwd("-D", str(path), "nobody")
    assert (code, "not in" in output) == (1, True)
    code, output = passwd("-b", str(path), "a:b", "x")
    assert (code, "':'" in output) == (2, True)
    code, _ = passwd("-b", str(path), "alice")
    assert code == 2  # -b needs the password
    code, _ = passwd(str(path), "alice", "visible")
    assert code == 2  # a password argument needs -b
    code, _ = passwd("-c", "-D", str(path), "alice")
    assert code == 2
    code, output = passwd("-b", "-I", "10", str(path), "alice", "a")
    assert code == 2
    code, output = passwd("-b", str(path), "alice", "")
    assert (code, "empty" in output) == (1, True)
    path.write_text("broken line\n")
    code, output = passwd("-b", str(path), "alice", "a")
    assert (code, f"{path}:1" in output) == (2, True)


def test_console_command(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "passwd", "-c", "-b", *FAST, str(path), "u", "p"],
        capture_output=True,
        text=True,
        timeout=unit(30),
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert list(read_password_file(path)) == ["u"]
