"""Tests of the example apps."""
