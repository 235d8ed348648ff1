"""Tests of the distribution: its extras and a bare install."""
