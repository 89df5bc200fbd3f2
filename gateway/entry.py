"""The ``edgebus`` console script.

``edgebus run`` and ``edgebus run -c FILE`` (``--config FILE``, ``--config=FILE``) start
the gateway through ``gateway.serve`` without importing click: the command-line library
is ~1.7 MB of a running gateway that it needs only to read those two words
(docs/performance.md, "Start-up memory"). Every other command line, help and errors
included, goes to the click CLI (``gateway.cli``), which runs ``run`` the same way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["main", "run_arguments"]

_CONFIG_OPTIONS = ("-c", "--config")


def run_arguments(args: list[str]) -> tuple[bool, Path | None]:
    """``(True, config path or None)`` when ``args`` (without the program name) is a
    plain ``run``; ``(False, None)`` for anything the click CLI should read (an option
    it would check, a directory it would refuse, ``--help``)."""
    if not args or args[0] != "run":
        return False, None
    rest = args[1:]
    if not rest:
        return True, None
    if len(rest) == 2 and rest[0] in _CONFIG_OPTIONS:
        value = rest[1]
    elif len(rest) == 1 and rest[0].startswith("--config="):
        value = rest[0].removeprefix("--config=")
    else:
        return False, None
    if not value or value.startswith("-") or os.path.isdir(value):
        return False, None
    return True, Path(value)


def main() -> None:
    is_run, config_path = run_arguments(sys.argv[1:])
    if not is_run:
        from gateway.cli import main as cli

        cli()
        return
    from gateway.serve import run_gateway

    try:
        run_gateway(config_path)
    except KeyboardInterrupt:  # before the loop's SIGINT handler: as click reports it
        print("Aborted!", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
