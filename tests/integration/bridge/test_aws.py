"""``edgebus aws provision`` against moto's AWS IoT control plane on loopback, the data
endpoint found with ``describe_endpoint``, and ``edgebus check`` on AWS IoT's limits.

moto answers the IoT API only; the endpoint it returns is a real-looking public name
that these tests never connect to (the data plane is tested against mosquitto in
test_profiles.py).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from bridge.aws import discover_endpoint
from gateway.config import parse_config
from gateway.config.models.bridges import AwsIotConfig
from tests.helpers.brokers import REPO_ROOT, free_port
from tests.helpers.timeouts import unit
from tests.integration.listeners.pki import Pki

REGION = "eu-west-1"


@pytest.fixture
def moto_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name, value in _credentials().items():
        monkeypatch.setenv(name, value)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _credentials() -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def _edgebus(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **_credentials(), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("AWS_REGION", None)
    env.pop("AWS_DEFAULT_REGION", None)
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=unit(60),
        check=False,
    )


def test_provision_creates_the_thing_certificate_policy_and_prints_a_bridge(
    tmp_path: Path, moto_url: str
) -> None:
    out = tmp_path / "certs"
    provision = ("aws", "provision", "--thing", "gw-1", "--region", REGION)
    done = _edgebus(*provision, "--endpoint-url", moto_url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    iot = boto3.client("iot", region_name=REGION, endpoint_url=moto_url)
    principals = iot.list_thing_principals(thingName="gw-1")["principals"]
    assert len(principals) == 1
    arn = principals[0]
    certificate = iot.describe_certificate(certificateId=arn.rsplit("/", 1)[1])
    assert certificate["certificateDescription"]["status"] == "ACTIVE"
    policies = iot.list_attached_policies(target=arn)["policies"]
    assert [p["policyName"] for p in policies] == ["gw-1-edgebus"]
    document = json.loads(iot.get_policy(policyName="gw-1-edgebus")["policyDocument"])
    connect = next(s for s in document["Statement"] if s["Action"] == "iot:Connect")
    assert connect["Resource"].endswith(":client/gw-1")

    certfile, keyfile = out / "gw-1.cert.pem", out / "gw-1.private.key"
    assert certfile.read_text() == certificate["certificateDescription"]["certificatePem"]
    assert keyfile.read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert stat.S_IMODE(keyfile.stat().st_mode) == 0o600

    config = parse_config(done.stdout, "printed.yaml")  # the printed entry is valid as is
    bridge = config.bridges[0]
    assert (bridge.name, bridge.type) == ("aws", "aws_iot")
    # describe_endpoint's answer (moto makes up a new one each time)
    assert str(bridge.server).endswith(f"-ats.iot.{REGION}.amazonaws.com:443")
    assert bridge.default_client_id("node") == "gw-1"
    assert bridge.alpn() == ("x-amzn-mqtt-ca",)
    assert bridge.tls is not None and bridge.tls.certfile == certfile.resolve()

    # Again: the thing and the policy are reused, a second certificate is attached.
    again = _edgebus(*provision, "--endpoint-url", moto_url, "--out", str(tmp_path / "second"))
    assert again.returncode == 0, again.stderr
    assert len(iot.list_thing_principals(thingName="gw-1")["principals"]) == 2


def test_provision_without_a_region_says_so(tmp_path: Path, moto_url: str) -> None:
    done = _edgebus("aws", "provision", "--thing", "gw-1", "--endpoint-url", moto_url)
    assert done.returncode == 1
    assert "no AWS region" in done.stderr


def test_the_data_endpoint_is_discovered(moto_url: str) -> None:
    found = discover_endpoint(AwsIotConfig(region=REGION, endpoint_url=moto_url))
    assert found.endswith(f"-ats.iot.{REGION}.amazonaws.com")  # and never connected to


def test_check_reports_aws_limits_and_the_qos_2_downgrade(tmp_path: Path) -> None:
    device = Pki.create(tmp_path / "pki").client("gw-1")  # check reads the files
    base = f"""
bridges:
  - name: aws
    type: aws_iot
    server: "example-ats.iot.eu-west-1.amazonaws.com:443"
    aws: {{region: eu-west-1, thing_name: gw-1}}
    tls: {{certfile: {device.cert}, keyfile: {device.key}}}
"""
    good = tmp_path / "good.yaml"
    good.write_text(base + '    forwards: [{local: "a/{x}", remote: "dt/{x}", qos: 2}]\n')
    done = _edgebus("check", "-c", str(good))
    assert done.returncode == 0, done.stderr
    assert "bridges[0].forwards[0].qos: warning: AWS IoT Core has no QoS 2: QoS 1 is used" in (
        done.stderr
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + f'    forwards: [{{local: "a/#", remote: "{"x" * 300}"}}]\n')
    done = _edgebus("check", "-c", str(bad))
    assert done.returncode == 2
    assert "bridges[0].forwards[0].remote: AWS IoT Core allows topics of 256 bytes at most" in (
        done.stderr
    )
