"""The Trio server: the broker object every connection shares, the accept side that starts it, and one loop per connection that reads, dispatches and answers requests."""
