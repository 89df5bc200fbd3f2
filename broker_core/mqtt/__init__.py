"""edgebus: broker_core/mqtt."""
