"""converge: spark_batch."""
