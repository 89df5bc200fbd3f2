"""``python -m idl_codegen``: the ``edgebus idl-codegen`` command."""

from idl_codegen.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
