"""Topic and broker configuration, describe/alter logic."""
