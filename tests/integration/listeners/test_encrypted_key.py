"""An encrypted private key without a password is a configuration error, never a prompt.

``load_cert_chain(certfile, keyfile, password=None)`` let OpenSSL ask "Enter PEM pass
phrase:" on the controlling terminal: `edgebus check` and `run` started from a terminal
waited there forever, without a terminal they died with a traceback (exit 1), and a
SIGHUP adding such a listener froze the broker. Here the commands run as subprocesses
whose controlling terminal is a pseudo-terminal, with a timeout: each reports the key
with file, line and YAML path (exit 2), a reload is refused and the broker still
answers, and nothing was written to the terminal.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import termios
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from bridge.link import tls_context
from broker_core.errors import BridgeError
from gateway.config.loader import parse_config
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import CertPair, Pki
from tests.interop.mosquitto.tools import (
    LOOPBACK,
    REPO_ROOT,
    edgebus_command,
    free_port,
    wait_for_mqtt,
)

PASSWORD = b"s3cret"
UNSET = "EDGEBUS_TEST_UNSET_KEY_PASSWORD"


def _take_terminal() -> None:
    """In the child, after ``setsid``: stdin (the pty's slave) becomes its controlling
    terminal, the /dev/tty OpenSSL would prompt on."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(UNSET, None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _drain(master: int) -> str:
    """What the child wrote to its terminal (a prompt), without blocking."""
    os.set_blocking(master, False)
    out = b""
    try:
        while chunk := os.read(master, 4096):
            out += chunk
    except (BlockingIOError, OSError):  # nothing more; EIO once the child closed it
        pass
    return out.decode(errors="replace")


@contextmanager
def on_terminal(args: Sequence[str], cwd: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``args`` with a pseudo-terminal as stdin and controlling terminal, output to
    ``log``; killed on the way out if still running."""
    master, slave = pty.openpty()
    try:
        with log.open("wb") as out:
            process = subprocess.Popen(
                list(args),
                cwd=cwd,
                env=_env(),
                stdin=slave,
                stdout=out,
                stderr=out,
                start_new_session=True,
                preexec_fn=_take_terminal,
            )
    finally:
        os.close(slave)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(unit(5))
        terminal = _drain(master)
        os.close(master)
        assert "pass phrase" not in terminal


def _finish(process: subprocess.Popen[bytes], log: Path) -> tuple[int, list[str]]:
    try:
        code = process.wait(unit(20))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running (a pass phrase?): {log.read_text()}") from None
    return code, log.read_text().splitlines()


def _tls_config(tmp_path: Path, pair: CertPair, password: str) -> Path:
    config = tmp_path / "edgebus.yaml"
    config.write_text(
        "listeners:\n"
        "  - type: tls\n"
        f"    bind: {LOOPBACK}:{free_port()}\n"
        "    tls:\n"
        f"      certfile: {pair.cert}\n"
        f"      keyfile: {pair.key}\n"
        f"      keyfile_password: {password}\n"
        "persistence: memory\n"
        f"data_dir: {tmp_path / 'data'}\n"
        "api: {enabled: false}\n"
    )
    return config


PASSWORDS = ["null", '""', "${" + UNSET + "}"]


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("password", PASSWORDS)
def test_an_encrypted_key_without_password_is_refused_not_prompted(
    tmp_path: Path, pki: Pki, command: str, password: str
) -> None:
    pair = pki.encrypted_server_key(PASSWORD)
    config = _tls_config(tmp_path, pair, password)
    args = [*edgebus_command(), command, str(config)]
    if command == "run":
        args = [*edgebus_command(), "run", "-c", str(config)]
    log = tmp_path / "out.log"
    with on_terminal(args, tmp_path, log) as process:
        code, lines = _finish(process, log)
    expected = (
        f"{config}:6 listeners[0].tls.keyfile: {str(pair.key)!r} is encrypted: set keyfile_password"
    )
    assert code == 2
    assert expected in lines
    assert not [line for line in lines if "Traceback" in line or "Errno" in line]
    if password.startswith("${"):  # the unset variable is named too, at its line
        assert f"{config}:7 listeners[0].tls.keyfile_password: environment variable {UNSET}" in (
            "\n".join(lines)
        )


def test_without_a_terminal_it_is_the_same_error(tmp_path: Path, pki: Pki) -> None:
    pair = pki.encrypted_server_key(PASSWORD)
    config = _tls_config(tmp_path, pair, "null")
    result = subprocess.run(
        [*edgebus_command(), "run", "-c", str(config)],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=unit(20),
        start_new_session=True,  # no controlling terminal
    )
    assert result.returncode == 2
    assert result.stdout.decode() + result.stderr.decode() == (
        f"{config}:6 listeners[0].tls.keyfile: {str(pair.key)!r} is encrypted: set"
        " keyfile_password\n"
    )


def test_the_right_password_still_loads_and_a_wrong_one_is_named(tmp_path: Path, pki: Pki) -> None:
    pair = pki.encrypted_server_key(PASSWORD)
    for password, code in (("s3cret", 0), ("wrong", 2)):
        config = _tls_config(tmp_path, pair, password)
        log = tmp_path / "out.log"
        with on_terminal([*edgebus_command(), "check", str(config)], tmp_path, log) as process:
            found, lines = _finish(process, log)
        assert found == code
        if code:
            assert "wrong or missing keyfile_password" in lines[0]


def _bridge_config(tmp_path: Path, pair: CertPair, password: str | None) -> Path:
    config = tmp_path / "bridge.yaml"
    config.write_text(
        "listeners: []\n"
        "persistence: memory\n"
        f"data_dir: {tmp_path / 'data'}\n"
        "api: {enabled: false}\n"
        "bridges:\n"
        "  - name: cloud\n"
        "    server: 127.0.0.1:1\n"
        "    tls:\n"
        f"      certfile: {pair.cert}\n"
        f"      keyfile: {pair.key}\n"
        + ("" if password is None else f"      keyfile_password: {password}\n")
        + "    forwards:\n"
        '      - {local: "a/#", remote: "b/x"}\n'
    )
    return config


def test_a_bridge_key_without_password_is_refused_not_prompted(tmp_path: Path, pki: Pki) -> None:
    pair = pki.encrypted_server_key(PASSWORD)
    config = _bridge_config(tmp_path, pair, None)
    log = tmp_path / "out.log"
    with on_terminal([*edgebus_command(), "check", str(config)], tmp_path, log) as process:
        code, lines = _finish(process, log)
    assert (code, lines) == (
        2,
        [
            f"{config}:10 bridges[0].tls.keyfile: {str(pair.key)!r} is encrypted:"
            " set keyfile_password"
        ],
    )
    config = _bridge_config(tmp_path, pair, "s3cret")
    with on_terminal([*edgebus_command(), "check", str(config)], tmp_path, log) as process:
        assert _finish(process, log) == (0, [f"{config}: OK"])


def test_the_bridge_client_context_takes_the_password(tmp_path: Path, pki: Pki) -> None:
    """``bridge.link.tls_context``, what a bridge started by a reload uses (a reload
    checks the files too): no prompt, a ``BridgeError``; the password when given."""
    pair = pki.encrypted_server_key(PASSWORD)
    without = parse_config(_bridge_config(tmp_path, pair, None).read_text()).bridges[0]
    with pytest.raises(BridgeError, match=r"tls\.keyfile: .* is encrypted: set keyfile_password"):
        tls_context(without)
    with_password = parse_config(_bridge_config(tmp_path, pair, "s3cret").read_text()).bridges[0]
    assert tls_context(with_password) is not None


def _publish(port: int) -> None:
    """A paho QoS 1 publish to ``port``, acknowledged in time."""
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="after-reload")
    client.connect(LOOPBACK, port)
    client.loop_start()
    try:
        info = client.publish("after/reload", b"1", qos=1)
        info.wait_for_publish(unit(5))
        assert info.is_published()
    finally:
        client.disconnect()
        client.loop_stop()


def test_a_reload_adding_such_a_listener_is_refused_and_the_broker_answers(
    tmp_path: Path, pki: Pki
) -> None:
    pair = pki.encrypted_server_key(PASSWORD)
    port = free_port()
    config = tmp_path / "edgebus.yaml"
    base = (
        "persistence: memory\n"
        f"data_dir: {tmp_path / 'data'}\n"
        "api: {enabled: false}\n"
        "listeners:\n"
        f"  - {{type: tcp, bind: '{LOOPBACK}:{port}'}}\n"
    )
    config.write_text(base)
    log = tmp_path / "gw.log"
    with on_terminal([*edgebus_command(), "run", "-c", str(config)], tmp_path, log) as gw:
        wait_for_mqtt(LOOPBACK, port)
        config.write_text(
            base + f"  - type: tls\n    bind: {LOOPBACK}:{free_port()}\n"
            f"    tls: {{certfile: {pair.cert}, keyfile: {pair.key}}}\n"
        )
        gw.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + unit(10)
        while "reload refused" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        refused = [line for line in log.read_text().splitlines() if "reload refused" in line]
        assert len(refused) == 1
        assert refused[0].endswith(
            f"reload refused: {config}:8 listeners[1].tls.keyfile: {str(pair.key)!r} is"
            " encrypted: set keyfile_password"
        )
        _publish(port)
        assert gw.poll() is None
        gw.send_signal(signal.SIGTERM)
        assert gw.wait(unit(10)) == 0
