"""Tests of the support-desk example app."""
