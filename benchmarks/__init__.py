"""converge: benchmarks."""
