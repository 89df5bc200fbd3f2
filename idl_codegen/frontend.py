"""IDL files -> :class:`~idl_codegen.model.Schema`: preprocess, lex, parse, resolve.

Syntax errors stop the run before resolution (their cascades would only add noise);
every error found up to that point is reported together in one :class:`IdlErrors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from idl_codegen.diagnostics import Diagnostics, IdlWarning
from idl_codegen.lexer import tokenize
from idl_codegen.model import Schema
from idl_codegen.parser import parse
from idl_codegen.preprocess import Preprocessor, SourceFile
from idl_codegen.resolve import resolve

__all__ = ["Compiled", "compile_idl"]


@dataclass(slots=True)
class Compiled:
    schema: Schema
    files: list[SourceFile]
    warnings: list[IdlWarning] = field(default_factory=list)


def compile_idl(
    paths: Sequence[str | Path],
    include_dirs: Sequence[str | Path] = (),
    defines: dict[str, str] | None = None,
) -> Compiled:
    """Read and resolve the IDL files ``paths``; raises ``IdlErrors`` listing every error."""
    diagnostics = Diagnostics()
    source = Preprocessor(include_dirs, diagnostics, defines).run(paths)
    tokens = tokenize(source, diagnostics)
    spec = parse(tokens, diagnostics)
    diagnostics.raise_if_errors()
    schema = resolve(spec, diagnostics)
    diagnostics.raise_if_errors()
    schema.sources = [file.provenance for file in source.files]
    provenance = {file.display: file.provenance for file in source.files}
    schema.origins = {name: provenance.get(display, display)
                      for name, display in schema.origins.items()}
    return Compiled(schema, source.files, diagnostics.warnings)
