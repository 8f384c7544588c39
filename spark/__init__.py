"""Spark integration (not yet implemented)."""
