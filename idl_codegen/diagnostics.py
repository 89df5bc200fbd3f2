"""Errors and warnings found in IDL sources, collected so one run reports many.

Every stage (preprocessor, lexer, parser, resolver) reports into one
:class:`Diagnostics`; at the end of a stage that found errors,
:meth:`Diagnostics.raise_if_errors` raises :class:`IdlErrors`, an
:class:`~broker_core.errors.IdlError` that carries all of them. Its ``file``, ``line``
and ``column`` are those of the first error; ``errors`` lists every one, in source
order; ``str()`` gives one ``file:line:col: message`` line per error.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.errors import IdlError

__all__ = ["Diagnostics", "IdlErrors", "IdlWarning", "Location"]


@dataclass(frozen=True, slots=True)
class Location:
    """A position in an IDL source: the file as displayed, 1-based line and column."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class IdlWarning:
    """Something legal but worth knowing (an ignored annotation, a lossy mapping)."""

    location: Location
    message: str

    def __str__(self) -> str:
        return f"{self.location}: warning: {self.message}"


class IdlErrors(IdlError):
    """One or more errors in IDL sources; ``errors`` holds each as an ``IdlError``."""

    def __init__(self, errors: list[IdlError]) -> None:
        if not errors:
            raise ValueError("IdlErrors needs at least one error")
        first = errors[0]
        super().__init__(first.message, first.file, first.line, first.column)
        self.errors: list[IdlError] = list(errors)

    def __str__(self) -> str:
        return "\n".join(str(error) for error in self.errors)


class Diagnostics:
    """Collects errors and warnings of one compilation."""

    def __init__(self, max_errors: int = 100) -> None:
        self.errors: list[IdlError] = []
        self.warnings: list[IdlWarning] = []
        self._max_errors = max_errors
        self._seen: set[tuple[str, int, int, str]] = set()

    def error(self, location: Location, message: str) -> None:
        """Record an error; identical repeats at one position are kept once."""
        key = (location.file, location.line, location.column, message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.errors.append(IdlError(message, location.file, location.line, location.column))
        if len(self.errors) >= self._max_errors:
            self.raise_if_errors()

    def warn(self, location: Location, message: str) -> None:
        self.warnings.append(IdlWarning(location, message))

    @property
    def has_errors(self) -> bool:
        return bool(self.errors)

    def raise_if_errors(self) -> None:
        """Raise the errors so far, ordered by file (in order of appearance), line, column."""
        if self.errors:
            files = {error.file: index for index, error in
                     reversed(list(enumerate(self.errors)))}
            ordered = sorted(self.errors,
                             key=lambda error: (files[error.file], error.line, error.column))
            raise IdlErrors(ordered)
