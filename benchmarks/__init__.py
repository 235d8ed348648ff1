"""Throughput harnesses (not tests)."""
