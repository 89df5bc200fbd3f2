"""The compiled stream-log encoder (spark_sink/_records.pyx), an optional extension.

Everything else is declared in pyproject.toml. ``optional=True``: where it cannot be
built (no C compiler, no Python headers) the install goes on without it and
``spark_sink.records`` uses its Python encoder, which writes the same bytes.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("spark_sink._records", ["spark_sink/_records.pyx"], optional=True),
    ],
)
