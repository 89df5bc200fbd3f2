"""``edgebus passwd``: create, add, change, delete users; then log in with the file."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import stat
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from broker_core.passwords import read_password_file, verify_password
from gateway.cli import main
from tests.helpers.timeouts import unit
from tests.integration.security.support import connect_raw, paho_login, security_gateway

FAST = ["-I", "4096"]
BIN = Path(sys.executable).parent


def passwd(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["passwd", *args], input=input)
    return result.exit_code, result.output


def test_round_trip_then_login(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", *FAST, str(path), "alice", "wonderland") == (0, "")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    code, output = passwd(*FAST, str(path), "bob", input="builder\nbuilder\n")
    assert (code, output) == (0, "")  # not a terminal: two lines read, no prompt
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


def _edgebus(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The installed ``edgebus`` command, ``stdin`` piped to it."""
    return subprocess.run(
        [str(BIN / "edgebus"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=unit(30),
        check=False,
    )


def test_a_piped_password_is_read_from_stdin_without_getpass(tmp_path: Path) -> None:
    """``printf 'secret\\nsecret\\n' | edgebus passwd FILE USER``: no prompt, no
    GetPassWarning; the user then logs in with that password."""
    path = tmp_path / "passwd"
    done = _edgebus("passwd", "-c", *FAST, str(path), "alice", stdin="s3cret pw\ns3cret pw\n")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = _edgebus("passwd", *FAST, str(path), "bob", stdin="builder\r\nbuilder")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    users = read_password_file(path)
    assert verify_password(b"s3cret pw", users["alice"]) is True
    assert verify_password(b"builder", users["bob"]) is True

    config = {
        "listeners": [
            {"type": "tcp", "name": "closed", "bind": "127.0.0.1:0", "allow_anonymous": False}
        ],
        "auth": {"password_file": str(path)},
    }
    with security_gateway(tmp_path, config) as gw:
        client, _ = connect_raw(gw, 5, "a", username="alice", password="s3cret pw")
        client.disconnect()
        client, _ = connect_raw(gw, 5, "b", username="bob", password="builder")
        client.disconnect()


@pytest.mark.parametrize(
    ("stdin", "error"),
    [
        ("one\ntwo\n", "Error: the two passwords on standard input do not match"),
        (
            "",
            "Error: no password on standard input (it is not a terminal): give it twice,"
            " one line each, or use -b",
        ),
        (
            "one\n",
            "Error: one password line on standard input: give the password twice, one line each",
        ),
        ("\n\n", "Error: the password is empty"),
    ],
)
def test_a_piped_password_given_wrong_is_refused(tmp_path: Path, stdin: str, error: str) -> None:
    path = tmp_path / "passwd"
    _edgebus("passwd", "-c", "-b", *FAST, str(path), "alice", "a", stdin="")
    before = path.read_text()
    done = _edgebus("passwd", *FAST, str(path), "alice", stdin=stdin)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", error + "\n")
    assert path.read_text() == before


def _read_until(fd: int, text: bytes, seen: bytearray, start: int) -> int:
    """Reads ``fd`` into ``seen`` until ``text`` appears after ``start``; returns where
    it ends."""
    deadline = time.monotonic() + unit(10)
    while (found := seen.find(text, start)) < 0:
        assert time.monotonic() < deadline, bytes(seen)
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            seen += os.read(fd, 1024)
    return found + len(text)


def test_on_a_terminal_the_password_is_asked_again_when_the_two_differ(tmp_path: Path) -> None:
    """Standard input a terminal (a pseudo-terminal, the command's controlling one):
    the prompt, without echo, as before."""
    path = tmp_path / "passwd"
    main_fd, terminal = os.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    job = subprocess.Popen(
        [str(BIN / "edgebus"), "passwd", "-c", *FAST, str(path), "alice"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
        preexec_fn=controlling_terminal,
    )
    os.close(terminal)
    seen, at = bytearray(), 0
    try:
        for prompt, answer in [
            (b"Password: ", b"one\n"),
            (b"Repeat for confirmation: ", b"two\n"),
            (b"do not match", b""),
            (b"Password: ", b"three\n"),  # asked again
            (b"Repeat for confirmation: ", b"three\n"),
        ]:
            at = _read_until(main_fd, prompt, seen, at)
            os.write(main_fd, answer)
        assert job.wait(unit(30)) == 0
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        with contextlib.suppress(OSError):
            seen += os.read(main_fd, 4096)
        os.close(main_fd)
    assert b"one" not in seen and b"three" not in seen  # no echo
    assert b"GetPassWarning" not in seen
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
