"""The sans-I/O coordinators and the log cleaner run inside the Trio server: groups, transactions, share groups, fetch sessions."""
