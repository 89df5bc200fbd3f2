"""Code generation into a directory: render, write only what changed, check for CI.

Python packages go to ``OUTDIR/<package>/...``; JSON Schemas to
``OUTDIR/json-schema/<a.b.T>.schema.json`` (a directory name no Python package can
have). Files that carry the generator's provenance marker but are no longer produced
are stale: :func:`write_files` removes them, :func:`check_files` reports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from idl_codegen.diagnostics import IdlWarning
from idl_codegen.emit_jsonschema import emit_jsonschema
from idl_codegen.emit_python import PythonOptions, emit_python
from idl_codegen.frontend import compile_idl
from idl_codegen.model import EnumType, Schema, StructType, TypedefType, UnionType
from idl_codegen.provenance import MARKER

__all__ = [
    "JSONSCHEMA_DIR",
    "TARGETS",
    "Generated",
    "Outcome",
    "check_files",
    "generate",
    "write_files",
]

TARGETS = ("python", "jsonschema")
JSONSCHEMA_DIR = "json-schema"


@dataclass(slots=True)
class Generated:
    schema: Schema
    files: dict[str, str]
    warnings: list[IdlWarning] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """``14 types (8 structs, 2 unions, 3 enums, 1 typedef), 6 constants, 5 modules``."""
        kinds = {"structs": StructType, "unions": UnionType, "enums": EnumType,
                 "typedefs": TypedefType}
        counts = {label: sum(isinstance(t, cls) for t in self.schema.types.values())
                  for label, cls in kinds.items()}
        detail = ", ".join(f"{n} {label if n != 1 else label[:-1]}"
                           for label, n in counts.items() if n)
        total = len(self.schema.types)
        text = f"{total} type{'s' if total != 1 else ''}" + (f" ({detail})" if detail else "")
        constants = len(self.schema.constants)
        modules = len(self.schema.modules)
        return (f"{text}, {constants} constant{'s' if constants != 1 else ''}, "
                f"{modules} module{'s' if modules != 1 else ''}")


@dataclass(slots=True)
class Outcome:
    """What writing or checking found, as relative posix paths."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not (self.changed or self.missing or self.stale)


def generate(
    paths: Sequence[str | Path],
    include_dirs: Sequence[str | Path] = (),
    targets: Iterable[str] = TARGETS,
    package: str = "",
    global_package: str = "idl_global",
    defines: Mapping[str, str] | None = None,
) -> Generated:
    """Compile ``paths`` and render the ``targets``; raises ``IdlErrors`` on bad IDL."""
    wanted = list(targets)
    unknown = [target for target in wanted if target not in TARGETS]
    if unknown:
        raise ValueError(f"unknown target {unknown[0]!r}; choose from {', '.join(TARGETS)}")
    compiled = compile_idl(paths, include_dirs, dict(defines or {}))
    files: dict[str, str] = {}
    if "python" in wanted:
        files.update(emit_python(compiled.schema, PythonOptions(package, global_package)))
    if "jsonschema" in wanted:
        files.update(emit_jsonschema(compiled.schema, JSONSCHEMA_DIR))
    return Generated(compiled.schema, dict(sorted(files.items())), compiled.warnings,
                     compiled.schema.sources)


def _generated_roots(files: Mapping[str, str]) -> set[str]:
    return {relative.split("/", 1)[0] for relative in files}


def _stale(outdir: Path, files: Mapping[str, str]) -> list[str]:
    found: list[str] = []
    for root in sorted(_generated_roots(files)):
        top = outdir / root
        if not top.is_dir():
            continue
        for directory, _, names in os.walk(top):
            for name in names:
                path = Path(directory) / name
                relative = path.relative_to(outdir).as_posix()
                if relative in files or not name.endswith((".py", ".json")):
                    continue
                try:
                    head = path.read_text(encoding="utf-8", errors="replace")[:400]
                except OSError:
                    continue
                if MARKER in head:
                    found.append(relative)
    return sorted(found)


def check_files(outdir: str | Path, files: Mapping[str, str]) -> Outcome:
    """Compare ``files`` with what ``outdir`` holds, without writing anything."""
    out = Path(outdir)
    outcome = Outcome()
    for relative, content in files.items():
        path = out / relative
        if not path.is_file():
            outcome.missing.append(relative)
        elif path.read_text(encoding="utf-8") != content:
            outcome.changed.append(relative)
        else:
            outcome.unchanged.append(relative)
    outcome.stale = _stale(out, files)
    return outcome


def write_files(
    outdir: str | Path,
    files: Mapping[str, str],
    progress: Callable[[str], None] | None = None,
) -> Outcome:
    """Write the files that differ, remove stale generated files; ``progress`` is called
    with each relative path as it is handled."""
    out = Path(outdir)
    outcome = Outcome()
    for relative, content in files.items():
        path = out / relative
        if path.is_file() and path.read_text(encoding="utf-8") == content:
            outcome.unchanged.append(relative)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(content, encoding="utf-8", newline="\n")
            temporary.replace(path)
            outcome.written.append(relative)
        if progress is not None:
            progress(relative)
    for relative in _stale(out, files):
        (out / relative).unlink()
        outcome.stale.append(relative)
    return outcome
