"""``edgebus idl-codegen`` (also ``python -m idl_codegen``): IDL -> Python and JSON Schema.

Exit status: 0 on success (``--check``: the output is up to date), 1 when the IDL has
errors, ``--check`` finds the output out of date or the output cannot be written (one
line, ``idl-codegen: cannot write PATH: REASON``), 2 on a usage error.
"""

from __future__ import annotations

import keyword
import sys
from pathlib import Path

import click

from broker_core.errors import IdlError
from idl_codegen.generate import TARGETS, Generated, check_files, generate, write_files
from idl_codegen.preprocess import is_macro_name
from idl_codegen.provenance import VERSION

__all__ = ["main"]

_PROGRESS_THRESHOLD = 200  # files; fewer are written without a progress bar


def _targets(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> list[str]:
    chosen: list[str] = []
    for value in values or (",".join(TARGETS),):
        for target in value.split(","):
            target = target.strip()
            if target not in TARGETS:
                raise click.BadParameter(f"{target!r}; choose from {', '.join(TARGETS)}")
            if target not in chosen:
                chosen.append(target)
    return chosen


def _defines(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, equals, body = value.partition("=")
        if not is_macro_name(name):
            raise click.BadParameter(f"{name!r} is not a macro name (a letter or '_', then "
                                     "letters, digits or '_')")
        out[name] = body if equals else "1"
    return out


def _package(_: click.Context, param: click.Parameter, value: str) -> str:
    """A dotted Python package name (``--package``; ``--global-package`` has no dots)."""
    dotted = param.name == "package"
    if value == "" and dotted:
        return value
    parts = value.split(".") if dotted else [value]
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
        what = "a dotted Python package name (myapp.idl)" if dotted else \
            "a Python package name (an identifier)"
        raise click.BadParameter(f"{value!r} is not {what}")
    return value


@click.command(
    name="idl-codegen",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Example: edgebus idl-codegen -I idl idl/vehicle/signals.idl -o generated",
)
@click.argument("schemas", nargs=-1, required=True, metavar="SCHEMA.idl...",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-I", "--include", "include_dirs", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Directory searched by #include (repeatable, in order).")
@click.option("-o", "--output", "outdir", required=True, metavar="OUTDIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="Directory to generate into.")
@click.option("--target", "targets", multiple=True, callback=_targets, metavar="LIST",
              help="Comma-separated outputs: python, jsonschema (default: both).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 when OUTDIR is not exactly what would be generated.")
@click.option("--package", default="", metavar="DOTTED", callback=_package,
              help="Generate the Python packages inside this package (e.g. myapp.idl).")
@click.option("--global-package", default="idl_global", show_default=True, callback=_package,
              help="Python package for types declared outside any IDL module.")
@click.option("-D", "--define", "defines", multiple=True, callback=_defines,
              metavar="NAME[=VALUE]", help="Define a preprocessor macro.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print errors and warnings (and --check differences) only.")
@click.version_option(VERSION, message="edgebus idl-codegen %(version)s")
def main(schemas: tuple[Path, ...], include_dirs: tuple[Path, ...], outdir: Path,
         targets: list[str], check: bool, package: str, global_package: str,
         defines: dict[str, str], quiet: bool) -> None:
    """Generate cyclonedds-python types and JSON Schemas from IDL SCHEMAS."""
    say = (lambda _: None) if quiet else (lambda text: click.echo(text, err=True))
    say(f"idl-codegen: reading {len(schemas)} IDL file{'s' if len(schemas) != 1 else ''}")
    try:
        generated = generate(schemas, include_dirs, targets, package, global_package, defines)
    except IdlError as error:
        problems = getattr(error, "errors", [error])
        for problem in problems:
            click.echo(str(problem), err=True)
        count = len(problems)
        click.echo(f"idl-codegen: {count} error{'s' if count != 1 else ''}", err=True)
        sys.exit(1)
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    for warning in generated.warnings:
        click.echo(str(warning), err=True)
    read = len(generated.sources)
    say(f"idl-codegen: {read} file{'s' if read != 1 else ''} read: {generated.summary()}")
    try:
        if check:
            _check(outdir, generated, quiet)
            return
        _write(outdir, generated, quiet, say)
    except OSError as error:  # -o under a file, no permission, a full disk
        where = error.filename if error.filename is not None else outdir
        click.echo(f"idl-codegen: cannot write {where}: {error.strerror or error}", err=True)
        sys.exit(1)


def _check(outdir: Path, generated: Generated, quiet: bool) -> None:
    outcome = check_files(outdir, generated.files)
    if outcome.up_to_date:
        if not quiet:
            click.echo(f"{outdir} is up to date ({len(outcome.unchanged)} files)")
        return
    for label, paths in (("missing", outcome.missing), ("changed", outcome.changed),
                         ("stale", outcome.stale)):
        for relative in paths:
            click.echo(f"{label}: {outdir / relative}", err=True)
    total = len(outcome.missing) + len(outcome.changed) + len(outcome.stale)
    click.echo(f"{outdir} is out of date ({total} file{'s' if total != 1 else ''}); "
               "run idl-codegen without --check to regenerate", err=True)
    sys.exit(1)


def _write(outdir: Path, generated: Generated, quiet: bool, say: object) -> None:
    files = generated.files
    if not quiet and len(files) >= _PROGRESS_THRESHOLD:
        with click.progressbar(length=len(files), label="idl-codegen: writing",
                               file=sys.stderr) as bar:
            outcome = write_files(outdir, files, progress=lambda _: bar.update(1))
    else:
        outcome = write_files(outdir, files)
    if quiet:
        return
    python = sum(1 for path in files if path.endswith(".py"))
    schemas = len(files) - python
    parts = [f"{python} Python file{'s' if python != 1 else ''}"] if python else []
    if schemas:
        parts.append(f"{schemas} JSON Schema{'s' if schemas != 1 else ''}")
    click.echo(f"Generated {' and '.join(parts)} in {outdir}: {len(outcome.written)} written, "
               f"{len(outcome.unchanged)} unchanged, {len(outcome.stale)} stale removed "
               f"({generated.summary()})")
