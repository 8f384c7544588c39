"""Compatibility harness (not yet implemented)."""
