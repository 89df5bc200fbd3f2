"""AWS IoT Core's control plane through boto3: the data endpoint, and provisioning.

- ``discover_endpoint(aws)``: the account's ATS data endpoint
  (``describe_endpoint(endpointType="iot:Data-ATS")``), for an ``aws_iot`` bridge
  without ``server``.
- ``provision(...)``: what ``edgebus aws provision --thing NAME`` does: the thing
  (created when missing), a new key pair and certificate (active), a policy allowing
  the thing to connect as itself and to publish, subscribe and receive (created when
  missing) attached to the certificate, the certificate attached to the thing, the
  certificate and key written to files (the key with mode 0600), and the endpoint
  (given, or found as above).

boto3 is imported when first needed: ``pip install 'edgebus[aws]'``. Credentials and the
region come from boto3's usual sources (environment, ``~/.aws``), or ``endpoint_url``
for an IoT API elsewhere (a test's moto server).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_core.errors import BridgeError
from gateway.config.models.bridges import AWS_IOT_ALPN, AwsIotConfig

__all__ = ["Provisioned", "bridge_yaml", "discover_endpoint", "iot_client", "policy", "provision"]


def iot_client(region: str | None, endpoint_url: str | None = None) -> Any:
    """A boto3 ``iot`` client; ``BridgeError`` when boto3 is missing or has no region."""
    try:
        import boto3
        from botocore.exceptions import NoRegionError
    except ImportError as exc:
        raise BridgeError("AWS IoT Core needs boto3: pip install 'edgebus[aws]'") from exc
    try:
        return boto3.client("iot", region_name=region, endpoint_url=endpoint_url)
    except NoRegionError as exc:
        raise BridgeError("no AWS region: give one (--region, aws.region, AWS_REGION)") from exc


def _call(what: str, fn: Any, **kw: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(**kw)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise BridgeError(f"AWS IoT {what}: {error.get('Code')}: {error.get('Message')}") from exc
    except BotoCoreError as exc:
        raise BridgeError(f"AWS IoT {what}: {exc}") from exc


def discover_endpoint(aws: AwsIotConfig) -> str:
    """The ATS data endpoint of the account, e.g. ``abc123-ats.iot.eu-west-1.amazonaws.com``."""
    client = iot_client(aws.region, aws.endpoint_url)
    reply = _call("describe_endpoint", client.describe_endpoint, endpointType="iot:Data-ATS")
    return str(reply["endpointAddress"])


def policy(thing: str, region: str) -> dict[str, Any]:
    """The policy ``provision`` creates: connect as the thing; publish, receive and
    subscribe on any topic of the account in ``region``."""
    arn = f"arn:aws:iot:{region}:*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "iot:Connect", "Resource": f"{arn}:client/{thing}"},
            {
                "Effect": "Allow",
                "Action": ["iot:Publish", "iot:Receive", "iot:RetainPublish"],
                "Resource": f"{arn}:topic/*",
            },
            {"Effect": "Allow", "Action": "iot:Subscribe", "Resource": f"{arn}:topicfilter/*"},
        ],
    }


@dataclass(frozen=True)
class Provisioned:
    thing: str
    region: str
    endpoint: str
    certificate_arn: str
    certificate_id: str
    policy: str
    certfile: Path
    keyfile: Path
    endpoint_url: str | None = None


def provision(
    thing: str,
    region: str | None,
    out_dir: Path,
    *,
    policy_name: str | None = None,
    endpoint: str | None = None,
    endpoint_url: str | None = None,
) -> Provisioned:
    """See the module docstring; ``BridgeError`` says what AWS refused, or why the files
    cannot be written (checked before anything is created: the private key exists only in
    the answer that creates it)."""
    certfile = out_dir / f"{thing}.cert.pem"
    keyfile = out_dir / f"{thing}.private.key"
    _writable(out_dir, certfile, keyfile)
    client = iot_client(region, endpoint_url)
    region = client.meta.region_name
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.describe_thing(thingName=thing)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise BridgeError(f"AWS IoT describe_thing: {exc}") from exc
        _call("create_thing", client.create_thing, thingName=thing)
    except BotoCoreError as exc:  # no credentials, no connection to the endpoint
        raise BridgeError(f"AWS IoT describe_thing: {exc}") from exc
    created = _call(
        "create_keys_and_certificate", client.create_keys_and_certificate, setAsActive=True
    )
    arn = created["certificateArn"]
    name = policy_name or f"{thing}-edgebus"
    try:
        client.get_policy(policyName=name)
    except BotoCoreError as exc:
        raise BridgeError(f"AWS IoT get_policy: {exc}") from exc
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise BridgeError(f"AWS IoT get_policy: {exc}") from exc
        _call(
            "create_policy",
            client.create_policy,
            policyName=name,
            policyDocument=json.dumps(policy(thing, region)),
        )
    _call("attach_policy", client.attach_policy, policyName=name, target=arn)
    _call("attach_thing_principal", client.attach_thing_principal, thingName=thing, principal=arn)
    if endpoint is None:
        reply = _call("describe_endpoint", client.describe_endpoint, endpointType="iot:Data-ATS")
        endpoint = str(reply["endpointAddress"])
    try:
        certfile.write_text(created["certificatePem"])
        fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(created["keyPair"]["PrivateKey"])
        os.chmod(keyfile, 0o600)
    except OSError as exc:
        raise BridgeError(
            f"certificate {created['certificateId']} was created but cannot be written:"
            f" {exc.strerror or exc}: {exc.filename}"
        ) from exc
    return Provisioned(
        thing,
        region,
        endpoint,
        arn,
        created["certificateId"],
        name,
        certfile,
        keyfile,
        endpoint_url,
    )


def _writable(out_dir: Path, *files: Path) -> None:
    """Create ``out_dir``; ``BridgeError`` when it or ``files`` cannot be written."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BridgeError(f"cannot create the directory {str(out_dir)!r}: {exc.strerror}") from exc
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise BridgeError(f"cannot write in {str(out_dir)!r}: Permission denied")
    for path in files:
        if path.is_dir():
            raise BridgeError(f"cannot write {str(path)!r}: it is a directory")


def bridge_yaml(done: Provisioned, name: str = "aws") -> str:
    """A ``bridges[]`` entry for what was provisioned (port 443 with ALPN
    ``x-amzn-mqtt-ca``; the system's CAs trust Amazon Root CA 1)."""
    lines = [
        "bridges:",
        f"  - name: {name}",
        "    type: aws_iot",
        f'    server: "{done.endpoint}:443"      # ALPN {AWS_IOT_ALPN}',
        "    aws:",
        f"      region: {done.region}",
        f"      thing_name: {done.thing}",
    ]
    if done.endpoint_url:
        lines.append(f'      endpoint_url: "{done.endpoint_url}"')
    lines += [
        "    tls:",
        f'      certfile: "{done.certfile.resolve()}"',
        f'      keyfile: "{done.keyfile.resolve()}"',
        "    forwards:",
        f'      - {{local: "site/{{rest#}}", remote: "things/{done.thing}/{{rest}}", qos: 1}}',
        "    subscriptions:",
        f'      - {{remote: "things/{done.thing}/commands/{{rest#}}", local: "commands/{{rest}}",'
        " qos: 1}",
    ]
    return "\n".join(lines) + "\n"
