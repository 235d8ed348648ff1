"""converge: examples."""
