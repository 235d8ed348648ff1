"""Tests of the ``converge`` command line (``framework.cli``): one module per command."""
