"""edgebus: broker_core/store."""
