"""edgebus: broker_core/listeners."""
