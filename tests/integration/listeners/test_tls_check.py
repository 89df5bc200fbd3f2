"""`edgebus check` loads every listener's certificate, key and CA bundle as `run` will:
a file that is not PEM, a key of another certificate, a wrong key password and a CA
bundle that is not PEM are each named with file, line and YAML path, all at once."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gateway.cli import main
from tests.integration.listeners.pki import Pki


def tls_listener(name: str, **tls: object) -> dict[str, object]:
    return {"type": "tls", "name": name, "bind": "127.0.0.1:0", "tls": tls}


def check(tmp_path: Path, listeners: list[dict[str, object]]) -> tuple[int, list[str]]:
    config = tmp_path / "edgebus.yaml"
    # one key per line, so that every key has its own line number
    config.write_text(
        json.dumps({"listeners": listeners, "persistence": "memory", "api": {"enabled": False}},
                   indent=1)
    )  # fmt: skip
    result = CliRunner().invoke(main, ["check", str(config)], prog_name="edgebus")
    return result.exit_code, result.output.splitlines()


def line_of(path: Path, text: str, after: int = 0) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if n > after and text in line)


def test_a_good_tls_listener_passes(tmp_path: Path, pki: Pki) -> None:
    good = tls_listener(
        "good",
        certfile=str(pki.server.cert),
        keyfile=str(pki.server.key),
        cafile=str(pki.ca),
        verify_peer=True,
    )
    assert check(tmp_path, [good]) == (0, [f"{tmp_path / 'edgebus.yaml'}: OK"])


def test_every_unusable_tls_file_is_reported_at_once(tmp_path: Path, pki: Pki) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    encrypted = pki.encrypted_server_key(b"s3cret")
    other_key = pki.client("someone").key
    listeners = [
        tls_listener("not-pem", certfile=str(not_pem), keyfile=str(pki.server.key)),
        tls_listener("not-a-pair", certfile=str(pki.server.cert), keyfile=str(other_key)),
        tls_listener(
            "wrong-password",
            certfile=str(encrypted.cert),
            keyfile=str(encrypted.key),
            keyfile_password="wrong",
        ),
        tls_listener(
            "bad-ca",
            certfile=str(pki.server.cert),
            keyfile=str(pki.server.key),
            cafile=str(not_pem),
            verify_peer=True,
        ),
        tls_listener(
            "bad-ciphers",
            certfile=str(pki.server.cert),
            keyfile=str(pki.server.key),
            ciphers="NO-SUCH-CIPHER",
        ),
    ]
    code, lines = check(tmp_path, listeners)
    config = tmp_path / "edgebus.yaml"
    assert code == 2
    where = [line.split(": ", 1)[0] for line in lines]
    names = ("not-pem", "not-a-pair", "wrong-password")
    certfiles = [line_of(config, '"certfile"', after=line_of(config, f'"{n}"')) for n in names]
    cafile, ciphers = line_of(config, '"cafile"'), line_of(config, '"ciphers"')
    assert where == [
        f"{config}:{certfiles[0]} listeners[0].tls.certfile",
        f"{config}:{certfiles[1]} listeners[1].tls.certfile",
        f"{config}:{certfiles[2]} listeners[2].tls.certfile",
        f"{config}:{cafile} listeners[3].tls.cafile",
        f"{config}:{ciphers} listeners[4].tls.ciphers",
    ]
    assert "keyfile_password" in lines[2]
    assert f"{str(not_pem)!r} is not a PEM bundle of CA certificates" in lines[3]
    assert "no usable cipher in 'NO-SUCH-CIPHER'" in lines[4]
