"""Consumer group coordinator (not yet implemented)."""
