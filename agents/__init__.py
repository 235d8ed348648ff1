"""converge: agents."""
