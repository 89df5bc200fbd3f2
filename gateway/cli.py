"""The ``edgebus`` command: ``run``, ``check`` and the tools built in.

With ``gateway.serve`` (``run``) and ``gateway.entry`` (the console script), the only
modules that configure logging handlers and print. ``run`` and ``check`` validate with
the same function (``gateway.config.validate_config``; ``run`` calls it in a child
process, ``gateway.config.light``): ``run`` starts nothing (no data directory, database
or API key) when ``check`` would report a problem.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from broker_core.errors import ConfigError
from gateway.serve import GC_GEN0_THRESHOLD, collect_less, refuse, run_gateway

if TYPE_CHECKING:
    from gateway.config import ValidConfig

__all__ = ["GC_GEN0_THRESHOLD", "collect_less", "main"]

#: Every command takes -h as well as --help.
CONTEXT = {"help_option_names": ["-h", "--help"]}

_CONFIG_PATH = click.Path(path_type=Path, dir_okay=False)


def _validate(config_path: Path | None) -> ValidConfig:
    from gateway.config import validate_config

    try:
        return validate_config(config_path)
    except ConfigError as exc:
        refuse(exc.problems, 2)


class _Commands(click.Group):
    """The commands, plus tools that live in their own packages, under their own names,
    imported when one of them runs (``edgebus run`` does not pay for them)."""

    TOOLS = {
        "idl-codegen": "idl_codegen.cli:main",
        "aws": "bridge.cli:aws",
        "spark": "spark_sink.cli:spark",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.TOOLS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self.TOOLS.get(cmd_name)
        if module is None:
            return super().get_command(ctx, cmd_name)
        module_name, _, attribute = module.partition(":")
        command: click.Command = getattr(importlib.import_module(module_name), attribute)
        return command


@click.group(cls=_Commands, context_settings=CONTEXT)
@click.version_option(package_name="edgebus", prog_name="edgebus", message="%(prog)s %(version)s")
def main() -> None:
    """edgebus: an edge data bus around an embedded MQTT broker."""


@main.command()
@click.option(
    "-c",
    "--config",
    "config_path",
    type=_CONFIG_PATH,
    help="YAML configuration file; without one the embedded defaults serve.",
)
def run(config_path: Path | None) -> None:
    """Start the gateway and serve until SIGTERM or SIGINT (SIGHUP reloads).

    The configuration is checked first, as `edgebus check` does: on any problem
    nothing starts and nothing is written.
    """
    run_gateway(config_path)


@main.command()
@click.argument("file", required=False, type=_CONFIG_PATH)
@click.option(
    "-c", "--config", "config_path", type=_CONFIG_PATH, help="The file, given as an option."
)
def check(file: Path | None, config_path: Path | None) -> None:
    """Check a configuration file as `edgebus run` would, starting nothing.

    Prints every problem with file, line and YAML path (exit status 2), or FILE: OK.
    Warnings (a setting that likely does not do what is meant: a name in a rule that
    differs from a column only by case, an empty file, ...) do not fail the check.
    """
    if file is not None and config_path is not None and file != config_path:
        raise click.UsageError("give the file once: edgebus check FILE, or -c FILE")
    path = file or config_path
    if path is None:
        raise click.UsageError("which file? edgebus check FILE")
    valid = _validate(path)
    warnings = valid.warnings()
    for warning in warnings:
        click.echo(warning, err=True)
    click.echo(f"{path}: OK" + (f" ({len(warnings)} warning(s))" if warnings else ""))


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

    The password is asked twice unless -b gives it on the command line; when standard
    input is not a terminal (a pipe, a file), its first two lines are read instead,
    without a prompt. The file is written with mode 0600.
    """
    from broker_core.passwords import (
        DEFAULT_ITERATIONS,
        StoredPassword,
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
    users: dict[str, StoredPassword] = {}
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
        password = _read_password()
    if not password:
        raise click.ClickException("the password is empty")
    users[username] = hash_password(password, iterations or DEFAULT_ITERATIONS)
    write_password_file(file, users)


def _read_password() -> str:
    """The new password, given twice: asked on the terminal (without echo, again when
    the two differ), or, when standard input is not a terminal, its first two lines,
    read as they are (no prompt, and none of getpass's warnings about echo)."""
    stdin = sys.stdin  # None when the command runs with standard input closed
    if stdin is not None and stdin.isatty():
        password: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        return password
    lines = [stdin.readline(), stdin.readline()] if stdin is not None else ["", ""]
    if not lines[0]:
        raise click.ClickException(
            "no password on standard input (it is not a terminal): give it twice,"
            " one line each, or use -b"
        )
    if not lines[1]:
        raise click.ClickException(
            "one password line on standard input: give the password twice, one line each"
        )
    first, second = (line.removesuffix("\n").removesuffix("\r") for line in lines)
    if first != second:
        raise click.ClickException("the two passwords on standard input do not match")
    return first


if __name__ == "__main__":
    main()
