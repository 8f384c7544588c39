"""What the broker counts and how Prometheus reads it."""
