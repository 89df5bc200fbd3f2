"""The ``edgebus`` command: ``run``, ``check`` and the tools built in.

The only module that configures logging handlers and prints.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from broker_core.errors import ConfigError
from broker_core.store.schema import StoreError
from gateway.config import GatewayConfig, load_config

if TYPE_CHECKING:
    from gateway.app import Gateway

__all__ = ["main"]


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _load(config_path: Path | None) -> GatewayConfig:
    try:
        return load_config(config_path)
    except ConfigError as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        raise SystemExit(2) from exc


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _reload(gateway: Gateway) -> None:
    """SIGHUP: re-read the configuration; a broken file changes nothing."""
    try:
        gateway.reload()
    except ConfigError as exc:
        for problem in exc.problems:
            click.echo(f"edgebus: reload refused: {problem}", err=True)


@click.group()
@click.version_option(package_name="edgebus")
def main() -> None:
    """edgebus: an edge data bus around an embedded MQTT broker."""


@main.command()
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="YAML configuration file; without one the embedded defaults serve.",
)
def run(config_path: Path | None) -> None:
    """Start the gateway and serve until SIGTERM or SIGINT."""
    config = _load(config_path)
    _configure_logging(config.logging.level)
    from gateway.app import Gateway

    async def serve() -> None:
        gateway = Gateway(config, config_path)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, gateway.stop)
        loop.add_signal_handler(signal.SIGHUP, _reload, gateway)
        await gateway.run()

    try:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            runner.run(serve())
    except* ConfigError as config_errors:
        for exc in config_errors.exceptions:
            click.echo(f"edgebus: {exc}", err=True)
        raise SystemExit(2) from None
    except* StoreError as store_errors:  # a lost or corrupt store: one line, no traceback
        for store_error in store_errors.exceptions:
            click.echo(f"edgebus: {store_error}", err=True)
        raise SystemExit(1) from None
    except* OSError as os_errors:
        for error in os_errors.exceptions:
            click.echo(f"edgebus: {error}", err=True)
        raise SystemExit(1) from None


@main.command()
@click.option(
    "-c", "--config", "config_path", required=True, type=click.Path(path_type=Path, dir_okay=False)
)
def check(config_path: Path) -> None:
    """Validate a configuration file without starting anything."""
    _load(config_path)
    click.echo(f"{config_path}: OK")


@main.command()
@click.option("-c", "--create", is_flag=True, help="Create the file, or overwrite it.")
@click.option("-b", "--batch", is_flag=True, help="Take the password from the command line.")
@click.option("-D", "--delete", is_flag=True, help="Delete the user.")
@click.option(
    "-I",
    "--iterations",
    type=click.IntRange(4096, 100_000_000),
    default=None,
    help="PBKDF2 iterations (default 210000).",
)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("username")
@click.argument("password", required=False)
def passwd(
    create: bool,
    batch: bool,
    delete: bool,
    iterations: int | None,
    file: Path,
    username: str,
    password: str | None,
) -> None:
    """Add, change or delete a user of a password file (like mosquitto_passwd).

    The password is asked twice unless -b gives it on the command line. The file is
    written with mode 0600.
    """
    from broker_core.passwords import (
        DEFAULT_ITERATIONS,
        PasswordHash,
        hash_password,
        read_password_file,
        username_problem,
        write_password_file,
    )

    if create and delete:
        raise click.UsageError("-c and -D cannot be combined")
    if password is not None and not batch:
        raise click.UsageError("a PASSWORD argument needs -b")
    if batch and password is None and not delete:
        raise click.UsageError("-b needs a PASSWORD argument")
    problem = username_problem(username)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="USERNAME")
    users: dict[str, PasswordHash] = {}
    if not create:
        if not file.exists():
            raise click.ClickException(f"{file} does not exist (-c creates it)")
        try:
            users = read_password_file(file)
        except ConfigError as exc:
            for line in exc.problems:
                click.echo(line, err=True)
            raise SystemExit(2) from exc
    if delete:
        if users.pop(username, None) is None:
            raise click.ClickException(f"user {username} is not in {file}")
        write_password_file(file, users)
        return
    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        assert password is not None
    if not password:
        raise click.ClickException("the password is empty")
    users[username] = hash_password(password, iterations or DEFAULT_ITERATIONS)
    write_password_file(file, users)


def _add_tools() -> None:
    """Tools that live in their own packages, under their own names."""
    from idl_codegen.cli import main as idl_codegen
    from spark_sink.cli import spark

    main.add_command(idl_codegen, name="idl-codegen")
    main.add_command(spark, name="spark")


_add_tools()

if __name__ == "__main__":
    main()
