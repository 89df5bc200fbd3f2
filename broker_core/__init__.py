"""edgebus: broker_core."""
