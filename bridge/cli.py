"""``edgebus aws provision --thing NAME``: a thing, its certificate and a bridge for it.

Added to the ``edgebus`` command by the CLI (``gateway.cli``); boto3 is imported only
when the command runs. Prints the ``bridges[]`` entry to paste into the configuration
file; see ``bridge.aws.provision`` for what is created.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import click

from broker_core.errors import BridgeError

__all__ = ["Failure", "aws"]


class Failure(click.ClickException):
    """A command that could not do its work: ``edgebus: <message>`` on stderr, status 1,
    as ``edgebus run`` reports its failures."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"edgebus: {self.format_message()}", err=True, file=file)


@click.group()
def aws() -> None:
    """AWS IoT Core: provision a thing for an `aws_iot` bridge."""


@aws.command()
@click.option("--thing", required=True, help="The IoT thing (created when missing); the client id.")
@click.option("--region", default=None, help="AWS region; default: boto3's (AWS_REGION, ~/.aws).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Directory for <thing>.cert.pem and <thing>.private.key (mode 0600).",
)
@click.option("--policy", "policy_name", default=None, help="Policy name; default <thing>-edgebus.")
@click.option(
    "--endpoint", default=None, help="Data endpoint; default: describe_endpoint (iot:Data-ATS)."
)
@click.option("--endpoint-url", default=None, help="AWS IoT API URL (another endpoint, a test).")
@click.option("--bridge-name", default="aws", show_default=True, help="Name of the bridge printed.")
def provision(
    thing: str,
    region: str | None,
    out_dir: Path,
    policy_name: str | None,
    endpoint: str | None,
    endpoint_url: str | None,
    bridge_name: str,
) -> None:
    """Create a key pair and certificate for THING, attach a policy and the thing to it,
    write the files, and print the bridge's configuration."""
    from bridge.aws import bridge_yaml
    from bridge.aws import provision as do_provision

    try:
        done = do_provision(
            thing,
            region,
            out_dir,
            policy_name=policy_name,
            endpoint=endpoint,
            endpoint_url=endpoint_url,
        )
    except BridgeError as exc:
        raise Failure(str(exc)) from exc
    click.echo(
        f"# thing {done.thing}: certificate {done.certificate_id}, policy {done.policy}", err=True
    )
    click.echo(f"# wrote {done.certfile} and {done.keyfile}", err=True)
    click.echo(bridge_yaml(done, bridge_name), nl=False)
