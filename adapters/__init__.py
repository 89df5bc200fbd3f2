"""edgebus: adapters."""
