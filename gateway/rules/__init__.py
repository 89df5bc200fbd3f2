"""edgebus: gateway/rules."""
