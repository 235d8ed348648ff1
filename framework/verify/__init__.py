"""Continuous verification: every change of the store checked against the index once it has
settled (``verifier``), by what the notification entries say changed (``changes``), each
document compared as the Spark check compares it (``compare``)."""

from framework.verify.compare import CATEGORIES, Category, classify
from framework.verify.verifier import CONSUMER, ChangeVerifier, Divergence, VerifyStats

__all__ = ["CATEGORIES", "CONSUMER", "Category", "ChangeVerifier", "Divergence", "VerifyStats", "classify"]
