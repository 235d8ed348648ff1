"""converge: framework."""
