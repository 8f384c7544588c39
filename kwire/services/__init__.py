"""The broker's services on the Trio thread: the sans-I/O coordinators run with their logs (groups, transactions, share groups and their state), group configs, fetch sessions and the log cleaner."""
