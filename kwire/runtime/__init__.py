"""Process-level plumbing every layer may use: the clock, blocking file work, the allocator and logging."""
