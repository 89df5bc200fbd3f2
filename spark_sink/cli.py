"""``edgebus spark``: the Spark tools, under the gateway's command.

``edgebus spark run ...`` runs the ready job (``spark_sink.job``) with its arguments as
they are; ``edgebus spark run --help`` lists them, pyspark installed or not (the
arguments are checked before pyspark is imported). Importing this module imports
neither pyspark nor pyarrow.
"""

from __future__ import annotations

import click

__all__ = ["spark"]

_PROG = "edgebus spark run"


@click.group()
def spark() -> None:
    """Apache Spark: read the stream log (needs `pip install 'edgebus[spark]'` and Java 17)."""


@spark.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(args: tuple[str, ...]) -> None:
    """Stream the log into Parquet, partitioned by date and protocol, exactly once.

    --gateway URL --out PATH --checkpoint PATH [--trigger 5s | availableNow]
    [--master local[*]]; `edgebus spark run --help` lists every option.
    """
    from spark_sink.job import parse_args  # argparse only: no pyspark

    # --help and a usage error answer without pyspark: only running the job needs it.
    parse_args(list(args), prog=_PROG)
    try:
        import pyspark  # noqa: F401

        from spark_sink.job import main
    except ImportError as exc:
        raise click.ClickException(
            f"edgebus spark needs {exc.name}: pip install 'edgebus[spark]'"
        ) from None
    raise SystemExit(main(list(args), prog=_PROG))
