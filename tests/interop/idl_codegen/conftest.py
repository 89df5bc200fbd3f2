"""Pin Cyclone DDS to loopback before any test of this directory creates a participant."""

from tests.interop.idl_codegen import dds_env  # noqa: F401  (sets CYCLONEDDS_URI)
