"""``edgebus aws provision`` failures: one ``edgebus: ...`` line and status 1, never a
traceback; nothing is created at AWS when the files could not be written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from click.testing import CliRunner

from gateway.cli import main

PROVISION = ["aws", "provision", "--thing", "t1", "--region", "eu-central-1"]


def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    # boto3's default session keeps the credentials it found (another test's, with moto):
    # a new one resolves them from this environment.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def test_no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_credentials(monkeypatch, tmp_path)
    # The endpoint on loopback: were credentials found after all, nothing leaves the host.
    args = [*PROVISION, "--endpoint-url", "http://127.0.0.1:9", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.stderr == "edgebus: AWS IoT describe_thing: Unable to locate credentials\n"


class _Unreachable:
    meta = type("Meta", (), {"region_name": "eu-central-1"})()

    def describe_thing(self, **_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/things/t1")


def test_an_unreachable_endpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("bridge.aws.iot_client", lambda *_: _Unreachable())
    result = CliRunner().invoke(
        main, [*PROVISION, "--endpoint-url", "http://127.0.0.1:9", "--out", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert result.stderr == (
        "edgebus: AWS IoT describe_thing: Could not connect to the endpoint URL:"
        ' "http://127.0.0.1:9/things/t1"\n'
    )


def test_an_output_directory_that_cannot_be_created_is_refused_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_aws(*_: Any) -> Any:
        raise AssertionError("AWS was called")

    monkeypatch.setattr("bridge.aws.iot_client", no_aws)
    (tmp_path / "afile").write_text("")
    result = CliRunner().invoke(main, [*PROVISION, "--out", str(tmp_path / "afile" / "x")])
    assert result.exit_code == 1
    assert result.stderr == (
        f"edgebus: cannot create the directory {str(tmp_path / 'afile' / 'x')!r}:"
        " Not a directory\n"
    )
