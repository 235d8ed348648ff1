"""The keyed agent runtime: ordered per key, at least once, parallel across keys."""
