"""edgebus: spark_sink."""
