"""converge: stores."""
