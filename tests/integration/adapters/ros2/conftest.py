"""Pin Cyclone DDS to loopback before anything in these tests imports cyclonedds."""

from tests.helpers import dds  # noqa: F401  (sets CYCLONEDDS_URI)
