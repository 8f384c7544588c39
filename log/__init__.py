"""The append-only log store: segments, indexes, recovery, retention."""
