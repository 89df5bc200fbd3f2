"""The files a configuration names, checked the way ``edgebus run`` will use them.

Validating with the context ``{"check_files": True}`` (``FILE_CHECKS``) makes the models
call these checks: the TLS certificate, key and CA bundle of every listener are loaded,
and so are those of every bridge and the CA bundle of every webhook,
the password file is read line by line, the data directory and the API key file must be
usable. Each check only reads: nothing is created, so ``edgebus check`` and a refused
``edgebus run`` leave no data directory, database or API key behind. Without the context
(``parse_config`` in tests, reloads) no file is touched.

Each function returns the problems as messages (``[]`` when there is none); the models
report them at their YAML path, with every other problem of the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker_core.errors import ConfigError

__all__ = [
    "FILE_CHECKS",
    "checks_files",
    "client_tls_file_problems",
    "data_dir_problem",
    "ipc_bind_problem",
    "key_file_problem",
    "log_file_problem",
    "password_file_problems",
    "tls_file_problems",
]

#: The validation context that turns the file checks on.
FILE_CHECKS: Mapping[str, bool] = {"check_files": True}


def checks_files(context: Any) -> bool:
    """True when the validation ``context`` asks for the file checks."""
    return isinstance(context, Mapping) and bool(context.get("check_files"))


def password_file_problems(path: Path) -> list[str]:
    """``passwd:3: problem`` for every bad line, or why the file cannot be read."""
    from broker_core.passwords import read_password_file

    try:
        read_password_file(path)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def tls_file_problems(
    certfile: Path,
    keyfile: Path,
    cafile: Path | None,
    min_version: Any,
    ciphers: str | None,
    keyfile_password: str | None,
    crlfile: Path | None = None,
) -> list[tuple[str, str]]:
    """``(option, message)`` for every reason the listener's TLS context cannot be built."""
    from broker_core.listeners.tls import tls_problems

    return tls_problems(
        certfile,
        keyfile,
        cafile=cafile,
        min_version=min_version,
        ciphers=ciphers,
        keyfile_password=keyfile_password,
        crlfile=crlfile,
    )


def client_tls_file_problems(
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    keyfile_password: str | None = None,
    crlfile: Path | None = None,
) -> list[tuple[str, str]]:
    """``(option, message)`` for every reason a client TLS context (a bridge's, a
    webhook's) could not load these files, in the words of ``tls_file_problems``."""
    problems = _client_tls_problems(cafile, certfile, keyfile, keyfile_password)
    if crlfile is not None:
        import ssl

        from broker_core.listeners.tls_context import load_crl

        problem = load_crl(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), crlfile)
        if problem is not None:
            problems.append(("crlfile", problem))
    return problems


def _client_tls_problems(
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    keyfile_password: str | None,
) -> list[tuple[str, str]]:
    if certfile is not None and keyfile is not None:
        return tls_file_problems(certfile, keyfile, cafile, "1.2", None, keyfile_password)
    if cafile is None:
        return []
    import ssl

    try:
        with open(cafile, "rb"):
            pass
    except OSError as exc:
        return [("cafile", f"cannot read {str(cafile)!r}: {exc.strerror or type(exc).__name__}")]
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cafile)
    except ssl.SSLError as exc:
        return [("cafile", f"{str(cafile)!r} is not a PEM bundle of CA certificates: {exc}")]
    return []


def _creatable(path: Path) -> str | None:
    """Why directory ``path`` (missing) could not be created, or None."""
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be created: {str(ancestor)!r} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot be created: no permission to write in {str(ancestor)!r}"
    return None


def data_dir_problem(path: Path) -> str | None:
    """Why ``data_dir`` could not hold the state, or None (it exists or can be created)."""
    if not path.exists():
        return _creatable(path)
    if not path.is_dir():
        return f"{str(path)!r} exists and is not a directory"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"no permission to write in {str(path)!r}"
    return None


def key_file_problem(path: Path) -> str | None:
    """Why the generated API key file could not be read, or created, or None."""
    from gateway.config.models.api import key_problem

    if not path.exists():
        reason = data_dir_problem(path.parent)
        return None if reason is None else f"cannot create {str(path)!r}: {reason}"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"cannot read {str(path)!r}: {reason}"
    problem = key_problem(text)
    return None if problem is None else f"{str(path)!r} {problem}"


def log_file_problem(path: Path) -> str | None:
    """Why the log file could not be appended to, or None."""
    if path.is_dir():
        return f"{str(path)!r} is a directory"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"no permission to write {str(path)!r}"
    directory = path.absolute().parent
    if not directory.is_dir():
        return f"the directory {str(directory)!r} does not exist"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"no permission to create a file in {str(directory)!r}"
    return None


def ipc_bind_problem(path: Path) -> str | None:
    """Why a socket file could not be created at ``path`` (an ``ipc://`` URL to bind), or
    None. ZeroMQ and NNG create the file, not its directory: a missing directory fails
    every bind, so it is an error here rather than a retry loop at run time. They unlink
    whatever is at the path before binding: a file there that is not a socket (a path
    mistyped onto a user's file) would be lost, so it is an error too."""
    directory = path.absolute().parent
    if not directory.exists():
        return (
            f"the directory {str(directory)!r} does not exist (ZeroMQ and NNG do not"
            " create it): create it first, or bind a path in an existing directory"
        )
    if not directory.is_dir():
        return f"{str(directory)!r} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"no permission to create a socket file in {str(directory)!r}"
    try:
        mode = path.lstat().st_mode
    except OSError:  # nothing there (or not to be told): the bind creates it
        return None
    if not stat.S_ISSOCK(mode):  # ZeroMQ and NNG would unlink it: a user's file lost
        return f"{str(path.absolute())!r} exists and is not a socket; refusing to replace it"
    return None
