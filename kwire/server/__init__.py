"""The Trio server: the broker object shared by every connection, and one loop per connection that reads, dispatches and answers requests."""
